"""Deletion reaches thread state: events, summaries, checkpoints and tool calls.

For one deleted memory record (DeletionTarget with memory ids, event ids and markers):
- thread events cited as the record's ``source.event_id`` (memory.Event.external_id == ThreadEvent id),
  and thread events whose content shows a marker, are blanked in place (row and seq kept), and in the
  same transaction every summary over them is marked stale and blanked; server summaries are then
  regenerated from the remaining events by a task, client summaries stay stale with the reason;
- summaries showing a marker are blanked and marked stale the same way;
- checkpoint and tool-call values that name a deleted memory id or show a marker are blanked.
Markers shorter than MIN_MARKER characters are not matched (they would match half of any text).
For a whole-subject erasure every thread, event, summary, checkpoint and tool call of the subject goes.
For a cleared thread (``target.threads``: thread id and the last sequence number cleared) its events up to
that number and the summaries over them are blank (the clear request did it; the steps repeat it, which
is a no-op unless the request's work was lost), and retrieval logs drop the entries quoting those summaries.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from memory.audit import audit
from memory.deletion.registry import DeletionTarget, on_request, purge_surface, read_check
from memory.models import Event
from memory.retrieval.models import RetrievalLog
from memory.threads.models import Checkpoint, Summary, Thread, ThreadEvent, ToolCall
from memory.threads.services.clear import clear_events
from memory.threads.services.events import blank_events, tombstone_events
from memory.threads.services.summaries import mark_stale, summaries_over

MIN_MARKER = 3
REASON = "a source was deleted (memory deletion)"


def _markers(target: DeletionTarget) -> list[str]:
    return [m for m in target.markers if m and len(m.strip()) >= MIN_MARKER]


def _scoped(model: Any, target: DeletionTarget) -> QuerySet[Any]:
    return model.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)


def _cited_ids(target: DeletionTarget) -> list[str]:
    if not target.event_ids:
        return []
    return list(_scoped(Event, target).filter(pk__in=target.event_ids).values_list("external_id", flat=True))


def _shows_marker(target: DeletionTarget, *fields: str) -> Q:
    q = Q(pk__in=[])
    for marker in _markers(target):
        for name in fields:
            q |= Q(**{f"{name}__icontains": marker})
    return q


def _hit_events(target: DeletionTarget) -> QuerySet[ThreadEvent]:
    """The subject's thread events this deletion reaches (recorded or already blanked)."""
    return (_scoped(ThreadEvent, target).annotate(data_text=Cast("data", TextField()))
            .filter(Q(pk__in=_cited_ids(target)) | _shows_marker(target, "text", "data_text")))


def _summaries_over_deleted(events: QuerySet[ThreadEvent]) -> QuerySet[Summary]:
    # Only summaries made before the event was blanked: a regenerated one covers the same range
    # but was built without it, and must not be re-staled by a retried step.
    over = Q(pk__in=[])
    for thread_id, seq, event_id, deleted_at in events.values_list("thread_id", "seq", "pk", "deleted_at"):
        made_before = Q(created_at__lte=deleted_at) if deleted_at else Q()
        over |= Q(thread_id=thread_id, from_seq__lte=seq, to_seq__gte=seq) & made_before
        over |= Q(thread_id=thread_id, referenced_event_ids__contains=[event_id])
    return Summary.objects.filter(over)


@on_request("thread_summaries")
def summaries_stale_on_request(target: DeletionTarget) -> list[str]:
    """At DELETE time, before the job runs: the summaries over the thread events that the deleted
    records cite (every summary of the subject, for an erasure) go stale and blank in the request's
    transaction, so they leave GET /summary and retrieval from that commit. No regeneration yet:
    the events still hold their words until the job's ``thread_events`` step blanks them, and that
    step queues the regeneration (it selects these summaries again: made before the blanking)."""
    if target.whole_subject:
        summaries = _scoped(Summary, target)
    else:
        cited = _scoped(ThreadEvent, target).filter(pk__in=_cited_ids(target))
        summaries = summaries_over(cited).filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    reason = REASON + " (deletion requested)"
    stale = mark_stale(summaries.filter(origin=Summary.Origin.SERVER), reason=reason, blank=True, regenerate=False)
    stale += mark_stale(summaries.filter(origin=Summary.Origin.CLIENT), blank=True, regenerate=False,
                        reason=reason + "; a client summary is not regenerated: write a new one")
    return stale


def _cleared_summaries(target: DeletionTarget) -> QuerySet[Summary]:
    over = Q(pk__in=[])
    for thread_id, up_to in target.threads:
        over |= Q(thread_id=thread_id, from_seq__lte=up_to)
    return _scoped(Summary, target).filter(over)


def _cleared_events(target: DeletionTarget) -> QuerySet[ThreadEvent]:
    over = Q(pk__in=[])
    for thread_id, up_to in target.threads:
        over |= Q(thread_id=thread_id, seq__lte=up_to)
    return _scoped(ThreadEvent, target).filter(over)


def _clear_threads(target: DeletionTarget) -> int:
    list(Thread.objects.select_for_update().filter(pk__in=[t for t, _ in target.threads]).order_by("pk")
         .values_list("pk"))
    return sum(clear_events(thread_id=thread_id, tenant_id=target.tenant_id, up_to_seq=up_to,
                            subject_external_id=target.subject_external_id) for thread_id, up_to in target.threads)


@purge_surface("thread_events", order=20)
@transaction.atomic
def purge_thread_events(target: DeletionTarget) -> int:
    if target.whole_subject:
        deleted, _ = _scoped(Thread, target).delete()  # cascades to events and summaries
        return deleted
    if target.threads:
        return _clear_threads(target)
    # Materialised before blanking: once blank, an event no longer shows the marker that found it.
    hit = list(_hit_events(target).values_list("pk", "thread_id", "status"))
    # Same lock order as every thread writer (see services.common.lock_thread).
    list(Thread.objects.select_for_update().filter(pk__in={t for _, t, _ in hit}).order_by("pk").values_list("pk"))
    fresh_ids = [pk for pk, _, status in hit if status == ThreadEvent.Status.RECORDED]
    count = blank_events(ThreadEvent.objects.filter(pk__in=fresh_ids))
    tombstone_events(tenant_id=target.tenant_id, subject_external_id=target.subject_external_id,
                     event_ids=fresh_ids)
    blanked = ThreadEvent.objects.filter(pk__in=[pk for pk, _, _ in hit])
    mark_stale(_summaries_over_deleted(blanked), reason=REASON, blank=True)
    count += _scrub_threads(target)
    if count:
        audit(actor="system", action="thread_event.purge", object_type="subject", object_id=str(target.subject_id),
              tenant_id=target.tenant_id, subject_id=target.subject_id, data={"events": fresh_ids})
    return count


def _threads_showing(target: DeletionTarget) -> QuerySet[Thread]:
    return (_scoped(Thread, target).annotate(metadata_text=Cast("metadata", TextField()))
            .filter(_shows_marker(target, "title", "metadata_text")))


def _scrub_threads(target: DeletionTarget) -> int:
    """A thread's title and metadata are the client's words too: blank the values that show a marker."""
    needles = _needles(target)
    touched = 0
    for thread in _threads_showing(target).select_for_update(of=("self",)).order_by("pk"):
        thread.title, _ = _scrub(thread.title, needles)
        thread.metadata, _ = _scrub(thread.metadata, needles)
        thread.save(update_fields=["title", "metadata"])
        touched += 1
    return touched


@purge_surface("summaries", order=21)
@transaction.atomic
def purge_summaries(target: DeletionTarget) -> int:
    summaries = _scoped(Summary, target)
    if target.whole_subject:
        deleted, _ = summaries.delete()
        return deleted
    if target.threads:
        return len(mark_stale(_cleared_summaries(target), reason=REASON, blank=True, regenerate=False))
    showing = summaries.filter(_shows_marker(target, "text"))
    return len(mark_stale(showing, reason=REASON, blank=True))


def _scrub(value: Any, needles: list[str]) -> tuple[Any, bool]:
    """``value`` with every string that shows a needle blanked; and whether anything changed."""
    if isinstance(value, str):
        hit = any(n in value.casefold() for n in needles)
        return ("" if hit else value), hit
    if isinstance(value, dict):
        out, changed = {}, False
        for key, item in value.items():
            out[key], c = _scrub(item, needles)
            changed |= c
        return out, changed
    if isinstance(value, list):
        pairs = [_scrub(item, needles) for item in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def _needles(target: DeletionTarget) -> list[str]:
    return [n.casefold() for n in [*target.memory_ids, *_markers(target)] if n]


CHECKPOINT_FIELDS = ("current_step", "completed_steps", "pending_approval", "tool_call_id", "idempotency_key",
                     "artifacts", "last_verified_outcome")
TOOL_CALL_FIELDS = ("arguments", "outcome")


@purge_surface("checkpoints", order=22)
@transaction.atomic
def purge_checkpoints(target: DeletionTarget) -> int:
    if target.whole_subject:
        deleted, _ = _scoped(Checkpoint, target).delete()
        calls, _ = _scoped(ToolCall, target).delete()
        return deleted + calls
    needles = _needles(target)
    if not needles:
        return 0
    # A checkpoint's version moves on: a writer holding the old ETag must re-read.
    return (_scrub_rows(_scoped(Checkpoint, target), CHECKPOINT_FIELDS, needles, bump_version=True)
            + _scrub_rows(_scoped(ToolCall, target), TOOL_CALL_FIELDS, needles))


def _scrub_rows(rows: QuerySet[Any], fields: tuple[str, ...], needles: list[str], *, bump_version: bool = False) -> int:
    touched = 0
    for row in rows.select_for_update().order_by("pk"):
        changed = False
        for name in fields:
            value, c = _scrub(getattr(row, name), needles)
            if c:
                setattr(row, name, value)
                changed = True
        if changed:
            if bump_version:
                row.version += 1
            row.save()
            touched += 1
    return touched


@purge_surface("thread_retrieval_logs", order=31)
@transaction.atomic
def purge_thread_retrieval_logs(target: DeletionTarget) -> int:
    """A cleared thread's summaries may have been served by retrieval: the log entries quoting them go."""
    if not target.threads:
        return 0
    ids = set(_cleared_summaries(target).values_list("pk", flat=True))
    touched = []
    logs = RetrievalLog.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id,
                                       candidates__contains=[{"source": "summaries"}])
    for log in logs.select_for_update().only("id", "candidates"):
        kept = [e for e in log.candidates if not (e.get("source") == "summaries" and e.get("id") in ids)]
        if len(kept) != len(log.candidates):
            log.candidates = kept
            touched.append(log)
    RetrievalLog.objects.bulk_update(touched, ["candidates"])
    return len(touched)


@read_check("thread_events")
def check_thread_events(target: DeletionTarget) -> list[str]:
    if target.whole_subject:
        return [f"thread {pk}" for pk in _scoped(Thread, target).values_list("pk", flat=True)]
    if target.threads:
        return [f"thread event {pk}" for pk in _cleared_events(target).filter(status=ThreadEvent.Status.RECORDED)
                .values_list("pk", flat=True)]
    return ([f"thread event {pk}" for pk in
             _hit_events(target).filter(status=ThreadEvent.Status.RECORDED).values_list("pk", flat=True)]
            + [f"thread {pk}" for pk in _threads_showing(target).values_list("pk", flat=True)])


@read_check("summaries")
def check_summaries(target: DeletionTarget) -> list[str]:
    summaries = _scoped(Summary, target)
    if target.whole_subject:
        return [f"summary {pk}" for pk in summaries.values_list("pk", flat=True)]
    if target.threads:
        cleared = _cleared_summaries(target)
        ids = list(cleared.values_list("pk", flat=True))
        quoted = RetrievalLog.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id,
                                             candidates__contains=[{"source": "summaries"}])
        return ([f"summary {pk}" for pk in cleared.exclude(text="", status=Summary.Status.STALE)
                 .values_list("pk", flat=True)]
                + [f"retrieval log {log.pk}" for log in quoted.only("id", "candidates")
                   if any(e.get("source") == "summaries" and e.get("id") in ids for e in log.candidates)])
    deleted = ThreadEvent.objects.filter(pk__in=_hit_events(target).values("pk"))
    over = _summaries_over_deleted(deleted).exclude(text="", status=Summary.Status.STALE)
    return [f"summary {pk}" for pk in
            (summaries.filter(_shows_marker(target, "text")) | over).distinct().values_list("pk", flat=True)]


@read_check("checkpoints")
def check_checkpoints(target: DeletionTarget) -> list[str]:
    if target.whole_subject:
        return ([f"checkpoint {w}" for w in _scoped(Checkpoint, target).values_list("workflow_id", flat=True)]
                + [f"tool call {k}" for k in _scoped(ToolCall, target).values_list("idempotency_key", flat=True)])
    needles = _needles(target)
    found = []
    for checkpoint in _scoped(Checkpoint, target):
        if any(_scrub(getattr(checkpoint, n), needles)[1] for n in CHECKPOINT_FIELDS):
            found.append(f"checkpoint {checkpoint.workflow_id}")
    for call in _scoped(ToolCall, target):
        if any(_scrub(getattr(call, n), needles)[1] for n in TOOL_CALL_FIELDS):
            found.append(f"tool call {call.workflow_id}/{call.idempotency_key}")
    return found
