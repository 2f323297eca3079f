"""Reads of deletion jobs. A job is found by its tenant and the keyed subject hash, never by the
subject row, so the status of an erasure stays readable after the subject is gone."""

from __future__ import annotations

from typing import Any, TypedDict

from memory.deletion.models import DeletionJob
from memory.errors import NotFound
from memory.tombstones import subject_hash


class StepPayload(TypedDict):
    name: str
    status: str
    attempts: int
    rows: int
    last_error: str


class JobPayload(TypedDict):
    deletion_id: str
    kind: str
    status: str
    reason: str
    memory_id: str | None
    created_at: str
    completed_at: str | None
    steps: list[StepPayload]


def deletion_get(*, tenant_id: int, subject_external_id: str, deletion_id: str) -> DeletionJob:
    job = (DeletionJob.objects.filter(pk=deletion_id, tenant_id=tenant_id,
                                      subject_hash=subject_hash(tenant_id, subject_external_id))
           .prefetch_related("steps").first())
    if job is None:
        raise NotFound(f"No deletion '{deletion_id}' for this principal.")
    return job


def deletion_for_user(*, user_id: int, deletion_id: str, subject_hashes: list[str]) -> DeletionJob:
    """/me/: the person asked for it, or it concerns one of their subjects."""
    from django.db.models import Q

    job = (DeletionJob.objects.filter(Q(requested_by=f"user:{user_id}") | Q(subject_hash__in=subject_hashes),
                                      pk=deletion_id).prefetch_related("steps").first())
    if job is None:
        raise NotFound("No such deletion.")
    return job


def job_payload(job: DeletionJob) -> JobPayload:
    def iso(value: Any) -> str | None:
        return value.isoformat() if value else None

    return {
        "deletion_id": job.pk, "kind": job.kind, "status": job.status, "reason": job.reason,
        "memory_id": job.memory_id or None, "created_at": job.created_at.isoformat(),
        "completed_at": iso(job.completed_at),
        "steps": [{"name": s.name, "status": s.status, "attempts": s.attempts, "rows": s.rows,
                   "last_error": s.last_error} for s in job.steps.all()],
    }
