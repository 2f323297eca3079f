"""Deletion reaches retrieval logs: they quote candidates' text and the caller's query."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory.deletion.registry import DeletionTarget, purge_surface, read_check
from memory.retrieval.models import RetrievalLog


def _quotes(entry: dict[str, Any], target: DeletionTarget) -> bool:
    if entry.get("memory_id") in target.memory_ids:
        return True
    text = (entry.get("text") or "").casefold()
    return any(m and m.casefold() in text for m in target.markers)


@purge_surface("retrieval_logs", order=30)
@transaction.atomic
def purge_retrieval_logs(target: DeletionTarget) -> int:
    """Whole subject: delete its logs. One record: drop the entries quoting it, blank a quoting query."""
    logs = RetrievalLog.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    if target.whole_subject:
        deleted, _ = logs.delete()
        return deleted
    touched = []
    for log in logs.select_for_update().only("id", "query", "candidates"):
        kept = [e for e in log.candidates if not _quotes(e, target)]
        query_quotes = any(m and m.casefold() in log.query.casefold() for m in target.markers)
        if len(kept) != len(log.candidates) or query_quotes:
            log.candidates = kept
            if query_quotes:
                log.query = ""
            touched.append(log)
    RetrievalLog.objects.bulk_update(touched, ["candidates", "query"])
    return len(touched)


@read_check("retrieval_logs")
def check_retrieval_logs(target: DeletionTarget) -> list[str]:
    """Where a marker (or a deleted record's id) still shows in the subject's logs."""
    found = []
    for log in RetrievalLog.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id).only(
            "id", "query", "candidates"):
        if any(_quotes(e, target) for e in log.candidates) or any(
                m and m.casefold() in log.query.casefold() for m in target.markers):
            found.append(f"retrieval log {log.pk}")
    return found
