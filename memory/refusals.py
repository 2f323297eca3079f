"""Refusals of the write gate, recorded without content so operators can see them by code.

A refused request may carry a secret, so the row keeps only what identifies the refusal: its code,
the tenant, the actor, the subject (if a principal token was verified), the route's name and the time.
It is an audit row (``action="request.refused"``), written outside the refused write's transaction,
which has already rolled back.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory.models import AuditEntry

ACTION = "request.refused"
# The refusals an operator watches: a secret in a write, a class that does not allow the write path,
# a key without the scope, a principal outside its namespaces.
CODES = ("secret_detected", "class_not_allowed", "insufficient_scope", "namespace_forbidden")


def refusals_record(*, codes: Iterable[str], tenant_id: int, actor: str, subject_id: int | None = None,
                    route: str = "") -> int:
    """One row per refusal among ``codes`` (others are ignored); returns how many were written."""
    rows = [AuditEntry(tenant_id=tenant_id, subject_id=subject_id, actor=actor, action=ACTION,
                       object_type="request", object_id=code, data={"code": code, "route": route})
            for code in codes if code in CODES]
    AuditEntry.objects.bulk_create(rows)
    return len(rows)
