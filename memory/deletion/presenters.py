"""Output shapes of the deletion area: a job and its steps, as the API and /me/ show them."""

from __future__ import annotations

from typing import Any, TypedDict

from memory.deletion.models import DeletionJob


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


def job_payload(job: DeletionJob) -> JobPayload:
    def iso(value: Any) -> str | None:
        return value.isoformat() if value else None

    # A job waiting for its automatic retry is still under way for the person: its last failure is for
    # operators (the overview), and only a job that ended failed says why.
    reason = job.reason if job.status == DeletionJob.Status.FAILED else ""
    return {
        "deletion_id": job.pk, "kind": job.kind, "status": job.status, "reason": reason,
        "memory_id": job.memory_id or None, "created_at": job.created_at.isoformat(),
        "completed_at": iso(job.completed_at),
        "steps": [{"name": s.name, "status": s.status, "attempts": s.attempts, "rows": s.rows,
                   "last_error": s.last_error} for s in job.steps.all()],
    }
