"""Reads of deletion jobs. A job is found by its tenant and the keyed subject hash, never by the
subject row, so the status of an erasure stays readable after the subject is gone.

A namespace-restricted principal sees a job only when everything the job deletes lies inside its
grant: every record's namespace (the plan's tombstones keep them, content-free), or the document's
access domain (``knowledge/<domain>``). A whole-subject erasure is seen, like it is asked for, only
by an unrestricted principal.
"""

from __future__ import annotations

from django.db.models import Q

from memory.deletion.models import DeletionJob
from memory.errors import NotFound
from memory.knowledge.models import AccessDomain
from memory.scope import KNOWLEDGE, READ, Scope
from memory.tombstones import subject_hash


def deletion_get(*, scope: Scope, deletion_id: str) -> DeletionJob:
    scope.require(READ)
    job = (DeletionJob.objects.filter(pk=deletion_id, tenant_id=scope.tenant_id,
                                      subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id))
           .prefetch_related("steps").first())
    if job is None or not _within_grant(scope, job):
        raise NotFound(f"No deletion '{deletion_id}' for this principal.")
    return job


def _within_grant(scope: Scope, job: DeletionJob) -> bool:
    if scope.unrestricted:
        return True
    plan = job.plan or {}
    if job.kind == DeletionJob.Kind.SUBJECT or plan.get("whole_subject"):
        return False
    if "document_ids" in plan:
        name = (AccessDomain.objects.filter(pk=int(plan.get("access_domain_id") or 0))
                .values_list("name", flat=True).first())
        return name is not None and scope.allows_namespace(f"{KNOWLEDGE}/{name}")
    namespaces = {t.get("namespace", "") for t in plan.get("tombstones", []) if isinstance(t, dict)}
    return bool(namespaces) and all(scope.allows_namespace(n) for n in namespaces)


def deletion_for_user(*, user_id: int, deletion_id: str, subject_hashes: list[str]) -> DeletionJob:
    """/me/: the person asked for it, or it concerns one of their subjects."""
    job = (DeletionJob.objects.filter(Q(requested_by=f"user:{user_id}") | Q(subject_hash__in=subject_hashes),
                                      pk=deletion_id).prefetch_related("steps").first())
    if job is None:
        raise NotFound("No such deletion.")
    return job
