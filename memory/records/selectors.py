"""Reads of long-term memory records. Each asks the scope for ``read``, then starts from
MemoryRecord.objects.for_scope(scope): tenant, subject, namespace grant and class readers in SQL."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from memory.errors import NotFound
from memory.models import MemoryRecord, RecordStatus
from memory.scope import READ, Scope


def effective_status(record: MemoryRecord) -> str:
    """A record whose validity ended is expired even before purge_expired flips its status."""
    if record.status == RecordStatus.ACTIVE and record.valid_until and record.valid_until <= timezone.now():
        return RecordStatus.EXPIRED
    return record.status


def memory_list(*, scope: Scope, namespace: str | None = None, kind: str | None = None,
                status: str | None = None) -> QuerySet[MemoryRecord]:
    scope.require(READ)
    qs = MemoryRecord.objects.for_scope(scope).select_related("memory_class", "source_event", "subject")
    if namespace:
        qs = qs.under([namespace])
    if kind:
        qs = qs.filter(kind=kind)
    if status == RecordStatus.ACTIVE:
        qs = qs.live()
    elif status == RecordStatus.EXPIRED:
        qs = qs.filter(status=RecordStatus.ACTIVE, valid_until__lte=timezone.now()) | qs.filter(
            status=RecordStatus.EXPIRED)
    elif status:
        qs = qs.filter(status=status)
    return qs.order_by("-created_at", "-pk")


def memory_get(*, scope: Scope, memory_id: str) -> MemoryRecord:
    scope.require(READ)
    record = (MemoryRecord.objects.for_scope(scope).select_related("memory_class", "source_event", "subject")
              .filter(pk=memory_id).first())
    if record is None:
        # Same answer for "does not exist" and "belongs to someone else": no existence oracle.
        raise NotFound(f"No memory '{memory_id}' in this scope.")
    return record


def memory_history(*, scope: Scope, memory_id: str) -> list[MemoryRecord]:
    """The supersession chain through ``memory_id``, oldest first, all within the scope."""
    record = memory_get(scope=scope, memory_id=memory_id)
    scoped = MemoryRecord.objects.for_scope(scope).select_related("memory_class", "source_event", "subject")
    return supersession_chain(scoped, record)


def supersession_chain(rows: QuerySet[MemoryRecord], record: MemoryRecord, *, newer: bool = True) -> list[MemoryRecord]:
    """``record`` with the versions it superseded and (``newer``) those that superseded it, oldest
    first, each read through ``rows`` (the chain stops at a version ``rows`` does not hold)."""
    chain = [record]
    seen = {record.pk}
    for link, forward in (("supersedes_id", False), ("superseded_by_id", True)):
        if forward and not newer:
            break
        next_id = getattr(record, link)
        while next_id and next_id not in seen:
            found = rows.filter(pk=next_id).first()
            if found is None:
                break
            chain.insert(len(chain) if forward else 0, found)
            seen.add(found.pk)
            next_id = getattr(found, link)
    return chain
