"""Reads of the retrieval area: logs (per principal) and exact facts (by precedence)."""

from __future__ import annotations

from memory.errors import Conflict as ConflictError
from memory.errors import NotFound
from memory.models import Confidence, Conflict, MemoryRecord
from memory.policy.precedence import rank
from memory.retrieval.models import RetrievalLog
from memory.scope import Scope


def retrieval_log_get(*, scope: Scope, retrieval_id: str) -> RetrievalLog:
    """A log is its principal's: another subject or tenant gets the same 404 as a missing id."""
    log = RetrievalLog.objects.filter(pk=retrieval_id, tenant_id=scope.tenant_id, subject_id=scope.subject_id).first()
    if log is None:
        raise NotFound(f"No retrieval '{retrieval_id}' for this principal.")
    return log


class FactConflict(ConflictError):
    """409 conflict; the view lists ``records`` in the contract's record shape."""

    def __init__(self, detail: str, records: list[MemoryRecord]) -> None:
        super().__init__(detail, code="conflict")
        self.records = records


def fact_get(*, scope: Scope, namespace: str, field: str) -> MemoryRecord:
    """The single active confirmed record for (namespace, field), chosen by precedence.

    Writes keep one active head per key, except where policy cannot decide (a stored open Conflict):
    then 409 ``conflict`` names the competing records. Candidates are never exact facts.
    """
    heads = list(MemoryRecord.objects.for_scope(scope).live()
                 .filter(namespace=namespace, field=field, confidence=Confidence.CONFIRMED)
                 .select_related("memory_class", "source_event", "subject").order_by("-created_at", "-pk"))
    if not heads:
        raise NotFound(f"No active fact '{field}' in namespace '{namespace}' for this principal.")
    if len(heads) == 1:
        return heads[0]
    best = min(rank(h.source_type) for h in heads)
    strongest = [h for h in heads if rank(h.source_type) == best]
    in_conflict = set(Conflict.records.through.objects.filter(
        memoryrecord_id__in=[h.pk for h in strongest], conflict__status=Conflict.Status.OPEN,
    ).values_list("memoryrecord_id", flat=True))
    if len(strongest) > 1 and in_conflict:
        raise FactConflict(f"Policy cannot decide between {len(strongest)} records for '{field}'.", strongest)
    return strongest[0]  # newest of the highest authority
