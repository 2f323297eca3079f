"""Reads of deletion jobs. A job is found by its tenant and the keyed subject hash, never by the
subject row, so the status of an erasure stays readable after the subject is gone."""

from __future__ import annotations

from memory.deletion.models import DeletionJob
from memory.errors import NotFound
from memory.tombstones import subject_hash


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
