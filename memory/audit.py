"""Audit rows: written in the caller's transaction, so a change and its audit land or fail together."""

from __future__ import annotations

from typing import Any

from memory.models import AuditEntry


def audit(*, actor: str, action: str, object_type: str, object_id: str, tenant_id: int,
          subject_id: int | None = None, data: dict[str, Any] | None = None) -> AuditEntry:
    # `data` carries ids and decisions only, never memory content (deletion relies on that). Every row has its
    # tenant (the distribution column: memory/sharding.py); a sweep across tenants writes one row per tenant.
    return AuditEntry.objects.create(
        tenant_id=tenant_id, subject_id=subject_id, actor=actor, action=action,
        object_type=object_type, object_id=object_id, data=data or {},
    )
