"""Deletion reaches the retrieval area: logs quote candidates' text and the caller's query, context windows
(RecordContext) hold the lexemes and the embedding of the deleted records' words, and a large subject's term
statistics (TermCount) count its words."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from memory.deletion.registry import DeletionTarget, purge_surface, read_check
from memory.retrieval.context import refresh_context
from memory.retrieval.models import RecordContext, RetrievalLog, SubjectIndex, TermBucket
from memory.retrieval.subject_index import delete_statistics, queue_maintenance, refresh_statistics
from memory.search import TEXT_SEARCH_CONFIG


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


def _windows(target: DeletionTarget) -> Any:
    rows = RecordContext.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    if target.whole_subject:
        return rows
    ids = list(target.memory_ids)
    return rows.filter(Q(record_id__in=ids) | Q(neighbours__overlap=ids))


@purge_surface("context_windows", order=86)
def purge_context_windows(target: DeletionTarget) -> int:
    """Drop every window that quotes a deleted record, then derive the live neighbours' windows again.

    Runs after the records step (85): the deleted records are no longer live, so the new windows are made
    of the remaining records only. Idempotent: a retry finds nothing quoting them."""
    quoting = list(_windows(target).values_list("record_id", flat=True))
    deleted, _ = RecordContext.objects.filter(record_id__in=quoting).delete()
    if not target.whole_subject:
        refresh_context([i for i in quoting if i not in set(target.memory_ids)])
    return deleted


@read_check("context_windows")
def check_context_windows(target: DeletionTarget) -> list[str]:
    """A window that still quotes a deleted record (or, for an erasure, any window of the subject)."""
    return [f"context window of {record_id}" for record_id in _windows(target).values_list("record_id", flat=True)]


@purge_surface("search_statistics", order=87)
def purge_search_statistics(target: DeletionTarget) -> int:
    """A large subject's term statistics count the words of its live records: recomputed now, after the records
    (85) and context windows (86) steps, so that a deleted record's words stay only where a live record also says
    them. An erasure deletes them with the subject's index row; its partial indexes are dropped by the worker on
    commit (DROP INDEX CONCURRENTLY cannot run in this step's transaction, and a plain DROP INDEX would lock the
    whole records table until the job's step commits). Until then they are unused: retrieval reads them only for
    a subject whose index row says ``ready``."""
    if not SubjectIndex.objects.filter(subject_id=target.subject_id).exists():
        return 0
    if not target.whole_subject:
        return int(refresh_statistics(target.subject_id))
    deleted = delete_statistics(target.subject_id)
    deleted += SubjectIndex.objects.filter(subject_id=target.subject_id).delete()[0]
    transaction.on_commit(lambda: queue_maintenance(target.subject_id))
    return deleted


@read_check("search_statistics")
def check_search_statistics(target: DeletionTarget) -> list[str]:
    """A word of a deleted record still counted in the subject's statistics while no live record says it (for an
    erasure: any statistics of the subject left)."""
    if target.whole_subject:
        left = TermBucket.objects.filter(subject_id=target.subject_id).count()
        return [f"{left} term statistics buckets of the erased subject"] if left else []
    with connection.cursor() as cursor:
        cursor.execute(_STALE_LEXEMES, {"subject": target.subject_id, "config": TEXT_SEARCH_CONFIG,
                                        "markers": list(target.markers)})
        return [f"term statistics of '{lexeme}'" for (lexeme,) in cursor.fetchall()]


_STALE_LEXEMES = """
SELECT DISTINCT tc.lexeme
FROM retrieval_termcount tc JOIN retrieval_termbucket b ON b.id = tc.bucket_id
WHERE b.subject_id = %(subject)s
  AND tc.lexeme IN (SELECT unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, m)))
                    FROM unnest(%(markers)s::text[]) m)
  AND NOT EXISTS (
      SELECT 1 FROM memory_memoryrecord r LEFT JOIN retrieval_recordcontext rc ON rc.record_id = r.id
      WHERE r.subject_id = %(subject)s AND r.status = 'active'
        AND (r.search_vector @@ quote_literal(tc.lexeme)::tsquery OR rc.terms @@ quote_literal(tc.lexeme)::tsquery))
"""
