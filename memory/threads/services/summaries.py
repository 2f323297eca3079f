"""Summaries that know their source: range, summarizer, unresolved items, referenced events, staleness."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone
from django_q.tasks import async_task

from memory.audit import audit
from memory.errors import InvalidInput
from memory.scope import WRITE, Scope
from memory.threads.models import Summary, Thread, ThreadEvent
from memory.threads.services.common import lock_thread, refuse_secrets, require
from memory.threads.summarizers import Summarizer, SummaryDraft, get_summarizer

TEXT_SEARCH_CONFIG = "english"


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
        transaction.on_commit(partial(async_task, "memory.threads.tasks.embed_summaries", [summary.pk]))
    return summary


@transaction.atomic
def summary_store(*, scope: Scope, thread_id: str, item: ClientSummaryInput) -> Summary:
    """A client-written summary. It is never regenerated: when its sources change it goes stale."""
    require(scope, WRITE)
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


def _summarize(thread: Thread, from_seq: int, to_seq: int, summarizer: Summarizer) -> SummaryDraft:
    events = list(ThreadEvent.objects.filter(thread=thread, seq__gte=from_seq, seq__lte=to_seq).order_by("seq"))
    return summarizer.summarize(events)


@transaction.atomic
def thread_summarize(*, scope: Scope, thread_id: str, from_seq: int | None = None,
                     to_seq: int | None = None, summarizer: Summarizer | None = None) -> Summary:
    """A server summary of ``from_seq..to_seq`` (default: the whole thread so far)."""
    require(scope, WRITE)
    thread = lock_thread(scope, thread_id)
    start, end = from_seq or 1, to_seq or thread.last_seq
    _check_range(thread, start, end)
    summarizer = summarizer or get_summarizer()
    summary = _create(thread=thread, origin=Summary.Origin.SERVER, draft=_summarize(thread, start, end, summarizer),
                      from_seq=start, to_seq=end, name=summarizer.name, version=summarizer.version,
                      actor=scope.actor)
    audit(actor=scope.actor, action="summary.create", object_type="summary", object_id=summary.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"thread_id": thread.pk, "from_seq": start, "to_seq": end, "summarizer": summarizer.name})
    return summary


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
        transaction.on_commit(partial(async_task, "memory.threads.tasks.regenerate_summary", pk))
    return fresh


def summaries_invalidate(*, thread: Thread, event: ThreadEvent, reason: str, blank: bool) -> list[str]:
    """Mark the summaries over one event stale; for client summaries say why it won't be regenerated."""
    summaries = summaries_over(ThreadEvent.objects.filter(pk=event.pk))
    client_reason = reason + "; a client summary is not regenerated: write a new one"
    stale = mark_stale(summaries.filter(origin=Summary.Origin.SERVER), reason=reason, blank=blank)
    stale += mark_stale(summaries.filter(origin=Summary.Origin.CLIENT), reason=client_reason, blank=blank)
    return stale


@transaction.atomic
def summary_regenerate(*, summary_id: str) -> str | None:
    """Replace a stale server summary by a new one built from the range's remaining events. Idempotent:
    a summary already replaced, fresh again, or gone is left alone. Returns the new summary's id."""
    head = Summary.objects.filter(pk=summary_id).values_list("tenant_id", "subject_id", "thread_id").first()
    if head is None:
        return None
    tenant_id, subject_id, thread_id = head
    thread = Thread.objects.select_for_update().filter(pk=thread_id).first()  # see lock_thread: the race
    summary = Summary.objects.select_for_update().filter(pk=summary_id).first()
    if (thread is None or summary is None or summary.status != Summary.Status.STALE
            or summary.origin != Summary.Origin.SERVER or summary.replaced_by_id):
        return None
    # A correction appended after the range must reach the regenerated text, so the new range
    # extends to the last event correcting one inside it.
    corrections = (ThreadEvent.objects.filter(thread=thread, status=ThreadEvent.Status.RECORDED,
                                              corrects__seq__gte=summary.from_seq, corrects__seq__lte=summary.to_seq)
                   .aggregate(last=Max("seq"))["last"])
    to_seq = max(summary.to_seq, corrections or 0)
    summarizer = get_summarizer()
    draft = _summarize(thread, summary.from_seq, to_seq, summarizer)
    new = _create(thread=thread, origin=Summary.Origin.SERVER, draft=draft, from_seq=summary.from_seq,
                  to_seq=to_seq, name=summarizer.name, version=summarizer.version, actor="system",
                  regenerates=summary)
    Summary.objects.filter(pk=summary.pk).update(replaced_by=new)
    audit(actor="system", action="summary.regenerate", object_type="summary", object_id=new.pk,
          tenant_id=tenant_id, subject_id=subject_id, data={"replaces": summary.pk, "thread_id": thread_id})
    return new.pk


def summaries_embed(*, summary_ids: list[str]) -> int:
    """Fill the derived embedding of fresh summaries that still lack one. Idempotent."""
    from memory.embedder import get_embedder

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
