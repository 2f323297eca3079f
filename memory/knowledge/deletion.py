"""Deleting a document: a deletion job of the shared runner (memory/deletion/services.py), run at once.

A document target is simpler than a memory one: its surfaces are ours (deletion_surfaces.py) and hold no
subject's memory, so the ``document`` kind of job walks only the knowledge surfaces and read checks
(``registry.job_kind``), carries no markers and writes no tombstones (a deleted document may be ingested
again). ``document_delete`` records the job (plan ``{"document_ids": [...]}``, one step per knowledge surface
plus ``verification``) and runs it through ``deletion_run`` in the request's transaction, with the runner's
step retries and its verification by reading: the 202 answer already reports ``completed``, and
``GET /api/v1/deletions/{id}`` shows the steps. A run that cannot finish leaves the job to the runner's own
retries (pending, retried by the sweep) and answers 409 ``deletion_incomplete``; deleting again resumes it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory.audit import audit
from memory.deletion import registry
from memory.deletion.journal import journal_append
from memory.deletion.models import DeletionJob, DeletionStep, new_deletion_id
from memory.deletion.services import VERIFICATION, deletion_run, rearm_failed
from memory.errors import Conflict, NotFound
from memory.knowledge.deletion_surfaces import DOCUMENT_KIND
from memory.knowledge.selectors import documents_for_scope
from memory.scope import WRITE, Scope
from memory.tombstones import subject_hash


def knowledge_surfaces() -> list[registry.Surface]:
    return registry.surfaces(DOCUMENT_KIND)


def _existing_job(tenant_id: int, document_id: int) -> DeletionJob | None:
    return (DeletionJob.objects.filter(tenant_id=tenant_id, kind=DOCUMENT_KIND,
                                       plan__document_ids__contains=[document_id])
            .order_by("-created_at").first())


def deletion_payload(job: DeletionJob) -> dict[str, Any]:
    return {"deletion_id": job.pk, "status": job.status, "status_url": f"/api/v1/deletions/{job.pk}",
            "document_ids": job.plan.get("document_ids", []),
            "steps": [{"name": s.name, "status": s.status, "rows": s.rows, "attempts": s.attempts}
                      for s in job.steps.order_by("position")]}


def document_delete(*, scope: Scope, document_id: int) -> DeletionJob:
    """Delete a document from every surface. Asking again for a deleted document returns its job (and resumes
    it when it had not finished)."""
    job = _delete(scope=scope, document_id=document_id)
    if job.status != DeletionJob.Status.COMPLETED:
        raise Conflict(f"The document's deletion could not finish; deleting again resumes it. {job.reason}"[:400],
                       code="deletion_incomplete")
    return job


@transaction.atomic
def _delete(*, scope: Scope, document_id: int) -> DeletionJob:
    scope.require(WRITE)
    # Lock the document row: two concurrent DELETEs (or a DELETE racing a re-ingest) serialise here.
    document = documents_for_scope(scope=scope).filter(pk=document_id).select_for_update(of=("self",)).first()
    job = _existing_job(scope.tenant_id, document_id)
    if job is not None and job.subject_hash != subject_hash(scope.tenant_id, scope.subject_external_id):
        job = None  # another principal's job: not this caller's to see
    if document is None and job is None:
        raise NotFound(f"No document '{document_id}' for this principal.")
    if job is not None and job.status != DeletionJob.Status.COMPLETED:
        return _run_inline(job)  # deleting again resumes the job
    if document is None:
        assert job is not None
        return job
    return document_purge(scope=scope, document=document)


def document_purge(*, scope: Scope, document: Any, job_id: str | None = None) -> DeletionJob:
    """The deletion itself, for a document the caller has locked and may delete. ``job_id``: a deletion
    re-applied from the journal after a restore keeps its id (and is not journaled twice)."""
    job = DeletionJob.objects.create(
        id=job_id or new_deletion_id(), tenant_id=scope.tenant_id, subject_id=scope.subject_id,
        subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id), kind=DOCUMENT_KIND,
        requested_by=scope.actor, status=DeletionJob.Status.PENDING,
        plan={"document_ids": [document.pk], "access_domain_id": document.access_domain_id,
              "subject_id": scope.subject_id},
    )
    names = [s.name for s in knowledge_surfaces()] + [VERIFICATION]
    DeletionStep.objects.bulk_create([DeletionStep(job=job, tenant_id=job.tenant_id, name=n, position=i)
                                      for i, n in enumerate(names)])
    if job_id is None:
        journal_append(job)
    return _run_inline(job)


def _run_inline(job: DeletionJob) -> DeletionJob:
    """The job through the shared runner, in the caller's transaction: on success the document is gone when the
    transaction commits, with the job that says so."""
    rearm_failed(job)  # asked again: a failed job is tried afresh, as a record's deletion asked again is
    deletion_run(job_id=job.pk)
    job.refresh_from_db()
    if job.status == DeletionJob.Status.COMPLETED:
        audit(actor=job.requested_by, action="document.delete", object_type="document",
              object_id=str(job.plan["document_ids"][0]), tenant_id=job.tenant_id, subject_id=job.subject_id,
              data={"deletion_id": job.pk, "steps": {s.name: s.rows for s in job.steps.all()}})
    return job
