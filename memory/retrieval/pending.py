"""What derived work is still to do for records: the one definition the embedder, the centroid, the subject indexes
and health's ``derived_pending`` share."""

from __future__ import annotations

from django.db.models import QuerySet

from memory.models import MemoryRecord


def pending_records() -> QuerySet[MemoryRecord]:
    """Records that should have an embedding and do not (active, in an embedded class)."""
    return MemoryRecord.objects.filter(embedding__isnull=True, memory_class__embed=True, status="active")
