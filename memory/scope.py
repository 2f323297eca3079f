"""The effective scope of a request: who is asking, for whom, and what they may touch.

A Scope is built only by authentication (agent key + principal token) or by the UI's access
helpers (a logged-in person's own subject). Every selector takes one; no code path reads memory
rows without the tenant and subject predicates it carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.namespaces import is_under

READ = "read"
WRITE = "write"
PROPOSE = "propose"
MINT = "mint"
ALL_PERMISSIONS = (READ, WRITE, PROPOSE, MINT)
DEFAULT_KEY_PERMISSIONS = (READ, WRITE, PROPOSE)


@dataclass(frozen=True)
class Scope:
    tenant_id: int
    subject_id: int
    subject_external_id: str
    permissions: frozenset[str]
    # Allowed namespace prefixes; None means every namespace of the tenant's classes.
    namespaces: tuple[str, ...] | None
    actor: str  # "agent_key:<id>", "user:<id>" or "system"
    agent_key_id: int | None = None
    user_id: int | None = None
    reader_role: str = "agent"  # which "allowed readers" entry of a memory class applies
    extra: dict = field(default_factory=dict, compare=False)

    def can(self, permission: str) -> bool:
        return permission in self.permissions

    def allows_namespace(self, path: str) -> bool:
        return self.namespaces is None or any(is_under(path, p) for p in self.namespaces)

    def narrowed_to(self, prefixes: list[str]) -> list[str]:
        """Requested prefixes intersected with what the scope allows (for SQL predicates)."""
        from memory.namespaces import intersect_prefixes

        return intersect_prefixes(self.namespaces, prefixes) or []
