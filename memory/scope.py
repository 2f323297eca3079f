"""The effective scope of a request, and the one gate every selector and service asks.

A Scope is built only by authentication (agent key + principal token), by the UI's access helpers
(a logged-in person's own subject, a reviewer's decision) or by a system job. Every selector and
service that reads or writes takes one and calls ``scope.require(permission)`` first, so no view
can forget the check; every query then carries the tenant, subject and namespace predicates.

Namespace grants (key ∩ token) cover more than memory namespaces. Two names are reserved for the
other data systems, so one rule, ``allows_namespace``, decides every surface:

- ``threads``: the subject's thread state (threads, events, summaries, checkpoints, tool calls);
- ``knowledge`` / ``knowledge/<domain>``: every access domain, or one.

An unrestricted scope (``namespaces is None``) reaches all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory.errors import Forbidden
from memory.namespaces import is_under


class Subject(Protocol):
    """What a constructor reads of a subject (memory.models.Subject, which imports this module)."""

    pk: Any
    tenant_id: int
    external_id: str

READ = "read"
WRITE = "write"
PROPOSE = "propose"
MINT = "mint"
ALL_PERMISSIONS = (READ, WRITE, PROPOSE, MINT)
DEFAULT_KEY_PERMISSIONS = (READ, WRITE, PROPOSE)

THREADS = "threads"
KNOWLEDGE = "knowledge"
RESERVED_NAMESPACES = (THREADS, KNOWLEDGE)


def require_permission(held: Iterable[str], *needed: str) -> None:
    """403 ``insufficient_scope`` unless ``held`` has one of ``needed``."""
    if not set(needed) & set(held):
        raise Forbidden(f"This agent key lacks the {' or '.join(needed)} scope.", code="insufficient_scope")


@dataclass(frozen=True)
class Scope:
    tenant_id: int
    subject_id: int
    subject_external_id: str
    permissions: frozenset[str]
    # Allowed namespace prefixes; None means every namespace of the tenant's classes.
    namespaces: tuple[str, ...] | None
    actor: str  # "agent_key:<id>", "user:<id>" or "system:<job>"
    agent_key_id: int | None = None
    user_id: int | None = None
    reader_role: str = "agent"  # which "allowed readers" entry of a memory class applies
    extra: dict = field(default_factory=dict, compare=False)

    # One constructor per kind of caller; nothing else builds a Scope (tests/test_layout.py).

    @classmethod
    def for_agent(cls, *, tenant_id: int, subject_id: int, subject_external_id: str, agent_key_id: int,
                  permissions: Iterable[str], namespaces: tuple[str, ...] | None) -> Scope:
        """An agent key presenting a principal token (api/authentication.py)."""
        return cls(tenant_id=tenant_id, subject_id=subject_id, subject_external_id=subject_external_id,
                   permissions=frozenset(permissions), namespaces=namespaces, actor=f"agent_key:{agent_key_id}",
                   agent_key_id=agent_key_id)

    @classmethod
    def for_owner(cls, *, user_id: int, subject: Subject) -> Scope:
        """A logged-in person on a subject they are linked to (memory/identity/access.py checks the link)."""
        return cls(tenant_id=subject.tenant_id, subject_id=subject.pk, subject_external_id=subject.external_id,
                   permissions=frozenset({READ, WRITE}), namespaces=None, actor=f"user:{user_id}",
                   user_id=user_id, reader_role="owner")

    @classmethod
    def for_reviewer(cls, *, user_id: int, subject: Subject, permissions: Iterable[str] = (WRITE,)) -> Scope:
        """A reviewer of the subject's tenant (memory/identity/access.py checks the tenant): what the
        reviewer decides is written as the reviewer, and read as the "reviewer" reader of a class."""
        return cls(tenant_id=subject.tenant_id, subject_id=subject.pk, subject_external_id=subject.external_id,
                   permissions=frozenset(permissions), namespaces=None, actor=f"user:{user_id}",
                   user_id=user_id, reader_role="reviewer")

    @classmethod
    def for_system(cls, *, actor: str, tenant_id: int, subject_id: int = 0, subject_external_id: str = "",
                   permissions: Iterable[str] = (WRITE,), reader_role: str = "agent") -> Scope:
        """A job or an operator's command acting on a tenant (subject 0: none) with no person behind it."""
        return cls(tenant_id=tenant_id, subject_id=subject_id, subject_external_id=subject_external_id,
                   permissions=frozenset(permissions), namespaces=None, actor=actor, reader_role=reader_role)

    def can(self, permission: str) -> bool:
        return permission in self.permissions

    def require(self, *permissions: str) -> None:
        """The permission check: one of ``permissions`` or 403 ``insufficient_scope``."""
        require_permission(self.permissions, *permissions)

    @property
    def unrestricted(self) -> bool:
        return self.namespaces is None

    def allows_namespace(self, path: str) -> bool:
        return self.namespaces is None or any(is_under(path, p) for p in self.namespaces)

    def require_namespace(self, path: str) -> None:
        if not self.allows_namespace(path):
            raise Forbidden(f"The principal's grant does not reach namespace '{path}'.", code="namespace_forbidden")

    def require_threads(self) -> None:
        """Thread state is reached only by an unrestricted principal or with a ``threads`` grant."""
        if not self.allows_namespace(THREADS):
            raise Forbidden("Thread state needs a 'threads' namespace grant.", code="namespace_forbidden")

    def require_unrestricted(self, what: str) -> None:
        if not self.unrestricted:
            raise Forbidden(f"{what} needs a principal without namespace restrictions.",
                            code="namespace_forbidden")
