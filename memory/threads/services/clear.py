"""Clearing a thread: every event so far leaves the log at once; a deletion job finishes the rest.

The request blanks the events in place (rows and sequence numbers stay, so the log has no holes and
the next append continues the numbering), tombstones their ids and blanks the summaries over them,
all in one transaction: the next read of the thread shows none of it. The deletion job then drops
the retrieval-log entries that quoted those summaries and verifies every thread surface by reading,
like any other deletion. Events appended after the clear are a new conversation and stay.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet

from memory.audit import audit
from memory.deletion.models import DeletionJob
from memory.deletion.services import thread_clear_job
from memory.scope import WRITE, Scope
from memory.threads.models import Summary, ThreadEvent
from memory.threads.services.common import lock_thread
from memory.threads.services.events import blank_events, tombstone_events
from memory.threads.services.summaries import mark_stale

REASON = "the thread was cleared"


@dataclass
class ClearResult:
    job: DeletionJob
    up_to_seq: int
    cleared: int


def clear_events(*, thread_id: str, tenant_id: int, subject_external_id: str, up_to_seq: int) -> int:
    """Blank the thread's recorded events up to ``up_to_seq`` and the summaries over them (idempotent).
    The caller holds the thread lock."""
    events = ThreadEvent.objects.filter(thread_id=thread_id, seq__lte=up_to_seq, status=ThreadEvent.Status.RECORDED)
    ids = list(events.values_list("pk", flat=True))
    blanked = blank_events(ThreadEvent.objects.filter(pk__in=ids))
    tombstone_events(tenant_id=tenant_id, subject_external_id=subject_external_id, event_ids=ids)
    # Nothing is left to summarise, so no regeneration is queued.
    mark_stale(summaries_cleared(thread_id, up_to_seq), reason=REASON, blank=True, regenerate=False)
    return blanked


def summaries_cleared(thread_id: str, up_to_seq: int) -> QuerySet[Summary]:
    return Summary.objects.filter(thread_id=thread_id, from_seq__lte=up_to_seq)


@transaction.atomic
def thread_clear(*, scope: Scope, thread_id: str) -> ClearResult:
    scope.require(WRITE)
    scope.require_threads()
    thread = lock_thread(scope, thread_id)
    cleared = clear_events(thread_id=thread.pk, tenant_id=scope.tenant_id,
                           subject_external_id=scope.subject_external_id, up_to_seq=thread.last_seq)
    job = thread_clear_job(scope=scope, thread_id=thread.pk, up_to_seq=thread.last_seq)
    audit(actor=scope.actor, action="thread.clear", object_type="thread", object_id=thread.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"up_to_seq": thread.last_seq, "events": cleared, "deletion_id": job.pk})
    return ClearResult(job=job, up_to_seq=thread.last_seq, cleared=cleared)
