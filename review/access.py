"""Reviewer access: which tenants a logged-in person reviews, and 404 for anything outside them."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404

from memory.models import Candidate, Conflict, MemoryClass, Tenant
from memory.policy.classes import readable_by

User = AbstractBaseUser | AnonymousUser


def reviewer_tenants(user: User) -> list[Tenant]:
    return list(Tenant.objects.filter(reviewers=user.pk).order_by("slug"))


def operator_tenants(user: User) -> list[Tenant]:
    """Tenants whose overview ``user`` may read: every tenant for staff, the reviewed ones for a reviewer.

    Raises PermissionDenied for anyone else: the overview shows no content, but it is still not theirs."""
    tenants = Tenant.objects.all() if getattr(user, "is_staff", False) else Tenant.objects.filter(reviewers=user.pk)
    found = list(tenants.order_by("slug"))
    if not found:
        raise PermissionDenied("The overview is for staff and reviewers.")
    return found


def candidate_for_reviewer(user: User, candidate_id: str) -> Candidate:
    """The candidate if ``user`` reviews its tenant; 404 otherwise (no existence oracle)."""
    candidate = (Candidate.objects.select_related("tenant", "subject", "memory_class")
                 .filter(pk=candidate_id, tenant__reviewers=user.pk).first())
    if candidate is None:
        raise Http404("No such candidate in your review queues.")
    return candidate


def conflict_for_reviewer(user: User, conflict_id: int) -> Conflict:
    conflict = (Conflict.objects.select_related("tenant", "subject")
                .filter(pk=conflict_id, tenant__reviewers=user.pk).first())
    if conflict is None:
        raise Http404("No such conflict in your review queues.")
    return conflict


def reviewer_may_read(memory_class: MemoryClass | None) -> bool:
    """Content of classes whose allowed readers lack "reviewer" is masked in the queue."""
    return memory_class is not None and readable_by(memory_class, "reviewer")
