"""Summaries that know their source: range, summarizer, unresolved items, referenced events, staleness."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from memory.audit import audit
from memory.db.retry import retried_on_deadlock
from memory.embedder import get_embedder
from memory.errors import Conflict, InvalidInput, NotFound
from memory.policy.secrets import refuse_secrets
from memory.queues import INTERACTIVE, enqueue
from memory.scope import READ, WRITE, Scope
from memory.search import TEXT_SEARCH_CONFIG
from memory.threads.models import Summary, Thread, ThreadEvent
from memory.threads.services.common import lock_thread
from memory.threads.summarizers import Summarizer, SummaryDraft, get_summarizer


@dataclass(frozen=True)
class ClientSummaryInput:
    text: str
    from_seq: int
    to_seq: int
    unresolved: list[Any] = field(default_factory=list)
    referenced_event_ids: list[str] = field(default_factory=list)
    summarizer_name: str = "client"
    summarizer_version: str = ""


def _check_range(thread: Thread, from_seq: int, to_seq: int) -> None:
    if from_seq < 1 or to_seq < from_seq or to_seq > thread.last_seq:
        raise InvalidInput(f"The range {from_seq}..{to_seq} is not inside this thread's events 1..{thread.last_seq}.",
                           code="invalid_range")


def _create(*, thread: Thread, origin: str, draft: SummaryDraft, from_seq: int, to_seq: int, name: str,
            version: str, actor: str, regenerates: Summary | None = None) -> Summary:
    summary = Summary.objects.create(
        tenant_id=thread.tenant_id, subject_id=thread.subject_id, thread=thread, origin=origin, text=draft.text,
        from_seq=from_seq, to_seq=to_seq, summarizer_name=name, summarizer_version=version,
        unresolved=draft.unresolved, referenced_event_ids=draft.referenced_event_ids, actor=actor,
        regenerates=regenerates,
    )
    Summary.objects.filter(pk=summary.pk).update(search_vector=SearchVector("text", config=TEXT_SEARCH_CONFIG))
    if summary.text:
        transaction.on_commit(partial(enqueue, "memory.threads.tasks.embed_summaries", [summary.pk], queue=INTERACTIVE))
    return summary


@retried_on_deadlock
@transaction.atomic
def summary_store(*, scope: Scope, thread_id: str, item: ClientSummaryInput) -> Summary:
    """A client-written summary. It is never regenerated: when its sources change it goes stale."""
    scope.require(WRITE)
    scope.require_threads()
    refuse_secrets({"text": item.text, "unresolved": item.unresolved, "summarizer": item.summarizer_name,
                    "version": item.summarizer_version})
    thread = lock_thread(scope, thread_id)
    _check_range(thread, item.from_seq, item.to_seq)
    known = set(ThreadEvent.objects.filter(thread=thread, pk__in=item.referenced_event_ids)
                .values_list("pk", flat=True))
    unknown = sorted(set(item.referenced_event_ids) - known)
    if unknown:
        raise InvalidInput(f"referenced_event_ids names events not in this thread: {', '.join(unknown)}.",
                           code="unknown_event")
    draft = SummaryDraft(text=item.text, unresolved=list(item.unresolved),
                         referenced_event_ids=list(dict.fromkeys(item.referenced_event_ids)))
    summary = _create(thread=thread, origin=Summary.Origin.CLIENT, draft=draft, from_seq=item.from_seq,
                      to_seq=item.to_seq, name=item.summarizer_name, version=item.summarizer_version,
                      actor=scope.actor)
    audit(actor=scope.actor, action="summary.store", object_type="summary", object_id=summary.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"thread_id": thread.pk, "from_seq": item.from_seq, "to_seq": item.to_seq})
    return summary


# A summarizer may be a model behind HTTP (seconds per call), so it runs outside the thread lock:
# appends must not wait for it. The events it read are compared, under the lock, with what is there
# now; a deletion, a correction of one of them (or, for a stale summary, a decision by someone else)
# in between means drafting again, so a summary is never stored from words a deletion removed.
MAX_DRAFT_ATTEMPTS = 3


def _sources(thread_id: str, from_seq: int, to_seq: int) -> tuple[list[ThreadEvent], tuple[Any, ...]]:
    """The range's events, and what a summary of them depends on (ids, deletions, corrections)."""
    events = list(ThreadEvent.objects.filter(thread_id=thread_id, seq__gte=from_seq, seq__lte=to_seq).order_by("seq"))
    corrections = tuple(ThreadEvent.objects.filter(thread_id=thread_id, status=ThreadEvent.Status.RECORDED,
                                                   corrects__seq__gte=from_seq, corrects__seq__lte=to_seq)
                        .order_by("seq").values_list("pk", flat=True))
    return events, (tuple((e.pk, e.status) for e in events), corrections)


def _busy(thread_id: str) -> Conflict:
    return Conflict(f"The events of thread '{thread_id}' kept changing while it was summarized; try again.",
                    code="thread_busy")


def thread_summarize(*, scope: Scope, thread_id: str, from_seq: int | None = None,
                     to_seq: int | None = None, summarizer: Summarizer | None = None) -> Summary:
    """A server summary of ``from_seq..to_seq`` (default: the whole thread so far).

    Not one transaction on purpose: drafting runs outside the thread lock (see MAX_DRAFT_ATTEMPTS);
    the write (summary + audit) is one transaction under the lock. Needs ``read`` as well as ``write``:
    the answer is a summary of stored events.
    """
    scope.require(WRITE)
    scope.require(READ)
    scope.require_threads()
    summarizer = summarizer or get_summarizer()
    for _ in range(MAX_DRAFT_ATTEMPTS):
        thread = Thread.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, pk=thread_id).first()
        if thread is None:
            raise NotFound(f"No thread '{thread_id}' in this scope.")
        start, end = from_seq or 1, to_seq or thread.last_seq
        _check_range(thread, start, end)
        events, read = _sources(thread.pk, start, end)
        draft = summarizer.summarize(events)
        with transaction.atomic():
            thread = lock_thread(scope, thread_id)
            if _sources(thread.pk, start, end)[1] != read:
                continue  # changed while drafting: draft again from what is there now
            summary = _create(thread=thread, origin=Summary.Origin.SERVER, draft=draft, from_seq=start, to_seq=end,
                              name=summarizer.name, version=summarizer.version, actor=scope.actor)
            audit(actor=scope.actor, action="summary.create", object_type="summary", object_id=summary.pk,
                  tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                  data={"thread_id": thread.pk, "from_seq": start, "to_seq": end, "summarizer": summarizer.name})
            return summary
    raise _busy(thread_id)


def summaries_over(events: QuerySet[ThreadEvent]) -> QuerySet[Summary]:
    """Summaries whose range covers one of ``events``, or that reference one of them."""
    covering = Q(pk__in=[])
    ids = []
    for thread_id, seq, event_id in events.values_list("thread_id", "seq", "pk"):
        covering |= Q(thread_id=thread_id, from_seq__lte=seq, to_seq__gte=seq)
        covering |= Q(thread_id=thread_id, referenced_event_ids__contains=[event_id])
        ids.append(event_id)
    return Summary.objects.filter(covering) if ids else Summary.objects.none()


def mark_stale(summaries: QuerySet[Summary], *, reason: str, blank: bool, regenerate: bool = True) -> list[str]:
    """Stale at once (retrieval and GET /summary skip it from this commit); regeneration queued on commit.

    ``blank``: the cause was a deletion, so the content goes now, not when the regeneration runs.
    ``regenerate=False``: the events are not blanked yet (a memory deletion still queued), so a
    regeneration now would copy their words again; the deletion job's step queues it later.
    """
    rows = list(summaries.values_list("pk", "origin", "status", "replaced_by_id"))
    if not rows:
        return []
    now = timezone.now()
    ids = [pk for pk, *_ in rows]
    fresh = [pk for pk, _, status, _ in rows if status == Summary.Status.FRESH]
    Summary.objects.filter(pk__in=fresh).update(status=Summary.Status.STALE, stale_reason=reason[:300], stale_at=now)
    if blank:
        # The derived vectors go too: they were computed from the deleted words.
        Summary.objects.filter(pk__in=ids).update(text="", unresolved=[], search_vector=None, embedding=None)
    to_regenerate = [pk for pk, origin, _, replaced in rows
                     if regenerate and origin == Summary.Origin.SERVER and not replaced]
    for pk in to_regenerate:
        transaction.on_commit(partial(enqueue, "memory.threads.tasks.regenerate_summary", pk, queue=INTERACTIVE))
    return fresh


def summaries_invalidate(*, thread: Thread, event: ThreadEvent, reason: str, blank: bool) -> list[str]:
    """Mark the summaries over one event stale; for client summaries say why it won't be regenerated."""
    summaries = summaries_over(ThreadEvent.objects.filter(pk=event.pk))
    client_reason = reason + "; a client summary is not regenerated: write a new one"
    stale = mark_stale(summaries.filter(origin=Summary.Origin.SERVER), reason=reason, blank=blank)
    stale += mark_stale(summaries.filter(origin=Summary.Origin.CLIENT), reason=client_reason, blank=blank)
    return stale


def _regenerable(summary: Summary | None) -> bool:
    return (summary is not None and summary.status == Summary.Status.STALE and summary.origin == Summary.Origin.SERVER
            and not summary.replaced_by_id)


def _regenerated_range(summary: Summary) -> tuple[int, int]:
    # A correction appended after the range must reach the regenerated text, so the new range
    # extends to the last event correcting one inside it.
    corrections = (ThreadEvent.objects.filter(thread_id=summary.thread_id, status=ThreadEvent.Status.RECORDED,
                                              corrects__seq__gte=summary.from_seq, corrects__seq__lte=summary.to_seq)
                   .aggregate(last=Max("seq"))["last"])
    return summary.from_seq, max(summary.to_seq, corrections or 0)


def summary_regenerate(*, summary_id: str) -> str | None:
    """Replace a stale server summary by a new one built from the range's remaining events. Idempotent:
    a summary already replaced, fresh again, or gone is left alone. Returns the new summary's id.

    Drafted outside the thread lock, written under it (see MAX_DRAFT_ATTEMPTS).
    """
    for _ in range(MAX_DRAFT_ATTEMPTS):
        summary = Summary.objects.filter(pk=summary_id).first()
        if summary is None or not _regenerable(summary):
            return None
        start, end = _regenerated_range(summary)
        events, read = _sources(summary.thread_id, start, end)
        summarizer = get_summarizer()
        draft = summarizer.summarize(events)
        with transaction.atomic():
            thread = Thread.objects.select_for_update().filter(pk=summary.thread_id).first()  # see lock_thread
            locked = Summary.objects.select_for_update().filter(pk=summary_id).first()
            if thread is None or locked is None or not _regenerable(locked):
                return None
            if _regenerated_range(locked) != (start, end) or _sources(thread.pk, start, end)[1] != read:
                continue
            new = _create(thread=thread, origin=Summary.Origin.SERVER, draft=draft, from_seq=start, to_seq=end,
                          name=summarizer.name, version=summarizer.version, actor="system", regenerates=locked)
            Summary.objects.filter(pk=locked.pk).update(replaced_by=new)
            audit(actor="system", action="summary.regenerate", object_type="summary", object_id=new.pk,
                  tenant_id=thread.tenant_id, subject_id=thread.subject_id,
                  data={"replaces": locked.pk, "thread_id": thread.pk})
            return new.pk
    raise _busy(summary_id)  # the task fails and django-q2 re-delivers it; the summary stays stale meanwhile


def summaries_embed(*, summary_ids: list[str]) -> int:
    """Fill the derived embedding of fresh summaries that still lack one. Idempotent."""
    rows = list(Summary.objects.filter(pk__in=summary_ids, status=Summary.Status.FRESH, embedding__isnull=True)
                .exclude(text="").values_list("pk", "text"))
    if not rows:
        return 0
    vectors = get_embedder().embed([text for _, text in rows])
    done = 0
    for (pk, text), vector in zip(rows, vectors, strict=True):
        # Only if unchanged since read: a deletion may have blanked it meanwhile.
        done += Summary.objects.filter(pk=pk, text=text, status=Summary.Status.FRESH).update(embedding=vector)
    return done
