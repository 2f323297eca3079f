"""Deletions made again after a restore: every deletion the journal holds that the restored database does not, and
every unfinished one it does, run to completion before the restored service answers (memory/deletion/journal.py
keeps the journal; ``manage.py restore`` calls ``journal_replay``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from memory.audit import audit
from memory.deletion.journal import EVENT_KIND, journal_entries
from memory.deletion.models import DeletionJob
from memory.deletion.services import _create_job, _hide_at_once, _Plan, _plan_records, _plan_subject, deletion_run
from memory.errors import NotFound
from memory.knowledge.deletion import DOCUMENT_KIND, document_purge
from memory.knowledge.models import Document
from memory.models import MemoryRecord, Subject
from memory.scope import READ, WRITE, Scope
from memory.threads.models import Thread, ThreadEvent
from memory.threads.services.clear import clear_events
from memory.threads.services.common import lock_thread
from memory.threads.services.events import blank_events, tombstone_events
from memory.threads.services.summaries import summaries_invalidate
from memory.tombstones import subject_hash


@dataclass
class ReplayResult:
    reapplied: list[str] = field(default_factory=list)  # jobs created again from the journal
    resumed: list[str] = field(default_factory=list)  # unfinished jobs the restored database already held
    completed: list[str] = field(default_factory=list)  # jobs that ran to completion during the replay
    failed: list[str] = field(default_factory=list)
    skipped: int = 0  # lines with nothing left to do in this database

    def as_dict(self) -> dict[str, Any]:
        return {"reapplied": len(self.reapplied), "resumed": len(self.resumed), "completed": len(self.completed),
                "failed": len(self.failed), "skipped": self.skipped}


def journal_replay(*, directory: Path | None = None, run: bool = True, progress: Any = None) -> ReplayResult:
    """Re-apply every journaled deletion the database does not hold, resume every unfinished one, and
    (``run``) run them all to completion in this process, so the restore returns only once they are done."""
    result = ReplayResult()
    to_run: list[str] = []
    for entry in journal_entries(directory):
        outcome, job_id = reapply_from_journal(entry)
        if outcome == "reapplied":
            result.reapplied.append(job_id or entry["kind"])
            if job_id:  # an event blanked in place is done already; a job runs below
                to_run.append(job_id)
        else:
            result.skipped += 1
        if progress is not None:
            progress()
    unfinished = DeletionJob.objects.exclude(status=DeletionJob.Status.COMPLETED).exclude(pk__in=to_run)
    for job_id in unfinished.order_by("created_at").values_list("pk", flat=True):
        result.resumed.append(job_id)
        to_run.append(job_id)
    if run:
        for job_id in to_run:
            # A failed job is set back to pending first: after a restore it must be tried again.
            DeletionJob.objects.filter(pk=job_id, status=DeletionJob.Status.FAILED).update(
                status=DeletionJob.Status.PENDING, reason="")
            status = deletion_run(job_id=job_id)
            (result.completed if status == DeletionJob.Status.COMPLETED else result.failed).append(job_id)
    return result


@transaction.atomic
def reapply_from_journal(entry: dict[str, Any]) -> tuple[str, str]:
    """Make one journaled deletion again in a restored database; returns (outcome, job id).

    The plan is made again from the restored rows (the backup predates the deletion, so they are there)
    under the journaled job id. Outcomes: "present" (the database holds the job: the replay resumes it
    if unfinished), "absent" (nothing the line names is in this database), "reapplied".
    """
    job_id, kind, tenant_id = str(entry.get("job_id") or ""), entry["kind"], int(entry["tenant_id"])
    plan: dict[str, Any] = entry.get("plan") or {}
    if job_id and DeletionJob.objects.filter(pk=job_id).exists():
        return "present", job_id
    # The subject's primary key may have been handed out again since the backup: the keyed hash decides.
    subject_pk = int(plan.get("subject_id") or entry.get("subject_id") or 0)
    subject = Subject.objects.filter(pk=subject_pk, tenant_id=tenant_id).first()
    if subject is None or subject_hash(tenant_id, subject.external_id) != entry["subject_hash"]:
        return "absent", job_id
    scope = Scope.for_system(actor="system:restore", tenant_id=tenant_id, subject_id=subject.pk,
                             subject_external_id=subject.external_id, permissions=(READ, WRITE))
    actor = str(entry.get("requested_by") or "system:restore")
    if kind in (DeletionJob.Kind.MEMORY, DeletionJob.Kind.RETENTION):
        if kind == DeletionJob.Kind.MEMORY and DeletionJob.objects.filter(
                tenant_id=tenant_id, memory_id=entry.get("memory_id", ""), kind=kind).exists():
            return "present", job_id  # a twin request's job (the one that won the unique constraint)
        records = list(MemoryRecord.objects.filter(tenant_id=tenant_id, subject_id=subject.pk,
                                                   pk__in=plan.get("memory_ids", [])))
        if not records:
            return "absent", job_id
        _create_job(scope=scope, kind=kind, plan=_plan_records(records), memory_id=entry.get("memory_id", ""),
                    actor=actor, job_id=job_id)
        _hide_at_once([r.pk for r in records])
    elif kind == DeletionJob.Kind.SUBJECT:
        _create_job(scope=scope, kind=kind, plan=_plan_subject(scope), extra_plan={"whole_subject": True},
                    actor=actor, job_id=job_id)
    elif kind == DeletionJob.Kind.THREAD:
        threads = [(str(t), int(seq)) for t, seq in plan.get("threads", [])]
        present = set(Thread.objects.select_for_update().filter(
            tenant_id=tenant_id, subject_id=subject.pk, pk__in=[t for t, _ in threads]).values_list("pk", flat=True))
        threads = [(t, seq) for t, seq in threads if t in present]
        if not threads:
            return "absent", job_id
        for thread_id, up_to_seq in threads:
            clear_events(thread_id=thread_id, tenant_id=tenant_id, subject_external_id=subject.external_id,
                         up_to_seq=up_to_seq)
        _create_job(scope=scope, kind=kind, plan=_Plan(memory_ids=[], event_ids=[], markers=[], tombstones=[]),
                    extra_plan={"threads": [list(t) for t in threads]}, actor=actor, job_id=job_id)
    elif kind == EVENT_KIND:
        return _reapply_event_deletion(scope, plan), job_id
    elif kind == DOCUMENT_KIND:
        documents = list(Document.objects.select_for_update().filter(
            tenant_id=tenant_id, pk__in=plan.get("document_ids", [])))
        if not documents:
            return "absent", job_id
        document_purge(scope=scope, document=documents[0], job_id=job_id)
    else:
        raise ValueError(f"unknown deletion kind {kind!r} in the journal")
    audit(actor="system:restore", action="deletion.reapplied", object_type="deletion", object_id=job_id,
          tenant_id=tenant_id, subject_id=subject.pk, data={"kind": kind})
    return "reapplied", job_id


def _reapply_event_deletion(scope: Scope, plan: dict[str, Any]) -> str:
    try:
        thread = lock_thread(scope, str(plan.get("thread_id", "")))
    except NotFound:
        return "absent"
    events = list(ThreadEvent.objects.filter(thread=thread, pk__in=plan.get("event_ids", []))
                  .exclude(status=ThreadEvent.Status.DELETED))
    if not events:
        return "absent"
    blank_events(ThreadEvent.objects.filter(pk__in=[e.pk for e in events]))
    tombstone_events(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                     event_ids=[e.pk for e in events])
    for event in events:
        summaries_invalidate(thread=thread, event=event, blank=True, reason=f"event {event.pk} was deleted")
    audit(actor="system:restore", action="deletion.reapplied", object_type="thread_event", object_id=events[0].pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id, data={"kind": EVENT_KIND})
    return "reapplied"
