"""Deleting a document: a deletion job over the knowledge purge surfaces, run at once.

The deletion job of ``memory/deletion`` plans memory targets (records, events, markers) and runs
them in a worker. A document target is simpler: its surfaces are ours (deletion_surfaces.py) and
hold no subject's memory, so ``document_delete`` records a DeletionJob (kind ``document``, plan
``{"document_ids": [...]}``) with one DeletionStep per knowledge surface plus ``verification``,
and runs them synchronously in the same transaction as the request: the 202 answer already
reports ``completed``, and ``GET /api/v1/deletions/{id}`` shows the steps. A failing surface or a
read check that still finds content rolls everything back (nothing half-deleted) and answers 409.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.audit import audit
from memory.deletion import registry
from memory.deletion.journal import journal_append
from memory.deletion.models import DeletionJob, DeletionStep, new_deletion_id
from memory.errors import Conflict, NotFound
from memory.knowledge.selectors import documents_for_scope
from memory.scope import WRITE, Scope
from memory.tombstones import subject_hash

DOCUMENT_KIND = "document"
VERIFICATION = "verification"
SURFACE_PREFIX = "knowledge_"


def knowledge_surfaces() -> list[registry.Surface]:
    return [s for s in registry.surfaces() if s.name.startswith(SURFACE_PREFIX)]


def _existing_job(tenant_id: int, document_id: int) -> DeletionJob | None:
    return (DeletionJob.objects.filter(tenant_id=tenant_id, kind=DOCUMENT_KIND,
                                       plan__document_ids__contains=[document_id])
            .order_by("-created_at").first())


def deletion_payload(job: DeletionJob) -> dict[str, Any]:
    return {"deletion_id": job.pk, "status": job.status, "status_url": f"/api/v1/deletions/{job.pk}",
            "document_ids": job.plan.get("document_ids", []),
            "steps": [{"name": s.name, "status": s.status, "rows": s.rows, "attempts": s.attempts}
                      for s in job.steps.order_by("position")]}


@transaction.atomic
def document_delete(*, scope: Scope, document_id: int) -> DeletionJob:
    """Delete a document from every surface. Asking again for a deleted document returns its job."""
    scope.require(WRITE)
    # Lock the document row: two concurrent DELETEs (or a DELETE racing a re-ingest) serialise here.
    document = documents_for_scope(scope=scope).filter(pk=document_id).select_for_update(of=("self",)).first()
    if document is None:
        job = _existing_job(scope.tenant_id, document_id)
        if job is not None and job.subject_hash == subject_hash(scope.tenant_id, scope.subject_external_id):
            return job
        raise NotFound(f"No document '{document_id}' for this principal.")
    return document_purge(scope=scope, document=document)


def document_purge(*, scope: Scope, document: Any, job_id: str | None = None) -> DeletionJob:
    """The deletion itself, for a document the caller has locked and may delete. ``job_id``: a deletion
    re-applied from the journal after a restore keeps its id (and is not journaled twice)."""
    document_id = document.pk
    job = DeletionJob.objects.create(
        id=job_id or new_deletion_id(), tenant_id=scope.tenant_id, subject_id=scope.subject_id,
        subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id), kind=DOCUMENT_KIND,
        requested_by=scope.actor, status=DeletionJob.Status.RUNNING, runs=1,
        plan={"document_ids": [document.pk], "access_domain_id": document.access_domain_id},
    )
    if job_id is None:
        journal_append(job)
    target = registry.DeletionTarget(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                     subject_external_id=scope.subject_external_id, document_ids=(document.pk,))
    surfaces = knowledge_surfaces()
    steps = []
    for position, surface in enumerate(surfaces):
        rows = surface.purge(target)
        steps.append(DeletionStep(job=job, tenant_id=job.tenant_id, name=surface.name, position=position,
                                  status=DeletionStep.Status.DONE, attempts=1, rows=int(rows or 0)))
    problems = [f"{name}: {p}" for name, check in registry.read_checks().items()
                if name.startswith(SURFACE_PREFIX) for p in check(target)]
    if problems:
        raise Conflict("The document is still readable after deletion: " + "; ".join(problems)[:400],
                       code="deletion_incomplete")
    steps.append(DeletionStep(job=job, tenant_id=job.tenant_id, name=VERIFICATION, position=len(surfaces),
                              status=DeletionStep.Status.DONE, attempts=1))
    DeletionStep.objects.bulk_create(steps)
    DeletionJob.objects.filter(pk=job.pk).update(status=DeletionJob.Status.COMPLETED, completed_at=timezone.now())
    audit(actor=scope.actor, action="document.delete", object_type="document", object_id=str(document_id),
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"deletion_id": job.pk, "steps": {s.name: s.rows for s in steps}})
    job.refresh_from_db()
    return job
