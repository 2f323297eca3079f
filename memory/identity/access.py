"""The people's gate: every "may this person do this here" of the browser UI, the admin and the commands.

Agents have one gate (authentication builds their ``Scope``; every selector and service calls
``scope.require``). People have this one: the reviewer predicate (``Tenant.objects.reviewed_by``)
and the owner predicate (``Subject.objects.owned_by``) are written once in memory/models.py, and
every page, admin action and command asks through the functions below, which either return what was
asked for or raise ``NoAccess``: the same 404 for a missing object and for someone else's, so no
page is an existence oracle. ``NoAccess`` is both a Django ``Http404`` (a view that does not catch it
answers 404) and the domain's ``NotFound`` (a service's caller that reports failures per item, such as
a bulk action, reports it like any other refusal).

Services take the checked caller: a ``Reviewer`` (the tenants a person reviews, read once) or the
``Scope`` built here for an owner or a reviewer, never a raw user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Model, QuerySet
from django.http import Http404

from memory.deletion.models import DeletionJob
from memory.deletion.selectors import deletion_for_user
from memory.errors import EngramError, NotFound
from memory.models import Candidate, Conflict, MemoryClass, MemoryRecord, Subject, Tenant
from memory.policy.classes import readable_by
from memory.records.selectors import memory_get
from memory.retrieval.models import RetrievalLog
from memory.retrieval.selectors import retrieval_log_get
from memory.scope import READ, Scope
from memory.tombstones import subject_hash

if TYPE_CHECKING:
    from memory.models import TenantQuerySet

User = AbstractBaseUser | AnonymousUser
M = TypeVar("M", bound=Model)


class NoAccess(NotFound, Http404):
    """Missing, or not this person's: one answer for both."""


# --- reviewers -----------------------------------------------------------------------------------


def reviewed_tenants(user: User) -> TenantQuerySet:
    return Tenant.objects.reviewed_by(user).order_by("slug")


@dataclass(frozen=True)
class Reviewer:
    """A person with the tenants they review, read once: what reviewer services and access helpers take."""

    user_id: int
    tenant_ids: frozenset[int]

    @property
    def actor(self) -> str:
        return f"user:{self.user_id}"

    @property
    def reviews_any(self) -> bool:
        return bool(self.tenant_ids)

    def reviews(self, tenant_id: int) -> bool:
        return tenant_id in self.tenant_ids

    def require(self, tenant_id: int, what: str = "Not found.") -> None:
        if tenant_id not in self.tenant_ids:
            raise NoAccess(what)

    def scope(self, subject: Subject, *permissions: str) -> Scope:
        """The reviewer acting on (or reading) one subject of a tenant they review."""
        self.require(subject.tenant_id)
        return Scope.for_reviewer(user_id=self.user_id, subject=subject, permissions=permissions or ("write",))


def reviewer_of(user: User) -> Reviewer:
    """The checked caller for every reviewer page and service (no tenants for anyone who reviews none)."""
    if not getattr(user, "is_authenticated", False):
        return Reviewer(user_id=0, tenant_ids=frozenset())
    tenant_ids = frozenset(reviewed_tenants(user).values_list("pk", flat=True))
    return Reviewer(user_id=int(user.pk or 0), tenant_ids=tenant_ids)


def reviews_any(user: User) -> bool:
    return bool(getattr(user, "is_authenticated", False)) and Tenant.objects.reviewed_by(user).exists()


def operator_tenants(user: User) -> list[Tenant]:
    """Tenants whose overview ``user`` may read: every tenant for staff, the reviewed ones for a reviewer,
    and 404 for anyone else (the overview shows no content, but it is still not theirs)."""
    tenants = Tenant.objects.all() if getattr(user, "is_staff", False) else Tenant.objects.reviewed_by(user)
    found = list(tenants.order_by("slug"))
    if not found:
        raise NoAccess("The overview is for staff and reviewers.")
    return found


def reviewed_get(reviewer: Reviewer, queryset: QuerySet[M], pk: Any, what: str = "Not found.") -> M:
    """One object of a tenant the reviewer reviews (``queryset``'s model has a ``tenant``), or 404."""
    found = queryset.filter(pk=pk, tenant_id__in=reviewer.tenant_ids).first() if str(pk) else None
    if found is None:
        raise NoAccess(what)
    return found


def access_candidate(reviewer: Reviewer, candidate_id: str) -> Candidate:
    return reviewed_get(reviewer, Candidate.objects.select_related("tenant", "subject", "memory_class",
                                                                   "source_event"),
                        candidate_id, f"No candidate '{candidate_id}' in your review queues.")


def access_conflict(reviewer: Reviewer, conflict_id: int) -> Conflict:
    return reviewed_get(reviewer, Conflict.objects.select_related("tenant", "subject"), conflict_id,
                        f"No conflict '{conflict_id}' in your review queues.")


def access_reviewed_subject(reviewer: Reviewer, subject_id: str) -> Subject:
    return reviewed_get(reviewer, Subject.objects.select_related("tenant"),
                        int(subject_id) if subject_id.isdigit() else 0, "No such subject in your tenants.")


def access_retrieval_log(reviewer: Reviewer, retrieval_id: str) -> RetrievalLog:
    """A retrieval log of a tenant the reviewer reviews, read as agents read theirs: through the
    retrieval-log selector with the reviewer's scope on the log's subject, which masks what the
    "reviewer" reader of each class may not read."""
    log = reviewed_get(reviewer, RetrievalLog.objects.select_related("tenant", "subject"), retrieval_id,
                       "No such retrieval in your tenants.")
    try:
        return retrieval_log_get(scope=reviewer.scope(log.subject, READ), retrieval_id=log.pk)
    except NotFound as exc:
        raise NoAccess("No such retrieval in your tenants.") from exc


def reviewer_may_read(memory_class: MemoryClass | None) -> bool:
    """Content of classes whose allowed readers lack "reviewer" is masked in the queue."""
    return memory_class is not None and readable_by(memory_class, "reviewer")


# --- people and their own memories ---------------------------------------------------------------


def owned_subjects(user: User) -> list[Subject]:
    if not getattr(user, "is_authenticated", False):
        return []
    return list(Subject.objects.owned_by(user).select_related("tenant").order_by("tenant__slug", "pk"))


def owns_any(user: User) -> bool:
    return bool(getattr(user, "is_authenticated", False)) and Subject.objects.owned_by(user).exists()


def access_subject(user: User, wanted: str | None) -> Subject:
    """The subject picked by ``wanted`` among the person's own; with none picked, their first; else 404."""
    subjects = owned_subjects(user)
    if wanted:
        for subject in subjects:
            if str(subject.pk) == wanted:
                return subject
        raise NoAccess("No such subject.")
    if not subjects:
        raise NoAccess("Your account is not linked to any memories.")
    return subjects[0]


def owner_scope(user: User, subject: Subject) -> Scope:
    """The scope of a person on one of their subjects (the subject must come from ``access_subject`` or
    ``owned_subjects``)."""
    return Scope.for_owner(user_id=int(user.pk or 0), subject=subject)


def access_record(user: User, memory_id: str) -> tuple[Subject, Scope, MemoryRecord]:
    """The record among the person's subjects, read through their owner scope, or 404."""
    for subject in owned_subjects(user):
        scope = owner_scope(user, subject)
        try:
            return subject, scope, memory_get(scope=scope, memory_id=memory_id)
        except EngramError:
            continue
    raise NoAccess("No such memory.")


def access_own_deletion(user: User, deletion_id: str) -> DeletionJob:
    """A deletion job the person asked for or one about a subject of theirs, or 404."""
    hashes = [subject_hash(s.tenant_id, s.external_id) for s in owned_subjects(user)]
    try:
        return deletion_for_user(user_id=int(user.pk or 0), deletion_id=deletion_id, subject_hashes=hashes)
    except EngramError as exc:
        raise NoAccess("No such deletion.") from exc


def access_operator_deletion(user: User, deletion_id: str) -> DeletionJob:
    """A deletion job of a tenant on the person's overview (staff: every tenant), or 404."""
    job = (DeletionJob.objects.filter(pk=deletion_id, tenant__in=operator_tenants(user)).select_related("tenant")
           .prefetch_related("steps").first())
    if job is None:
        raise NoAccess("No such deletion.")
    return job
