"""Deletion reaches the retrieval area: logs may quote the caller's query and provider entries' text, context windows
(RecordContext) hold the lexemes and the embedding of the deleted records' words, a large subject's term
statistics (TermCount) count its words, and a subject's centroid (SubjectCentroid) averages its records' vectors."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from memory.deletion.registry import DeletionTarget, on_plan, purge_surface, read_check
from memory.models import MemoryRecord
from memory.retrieval.centroid import refresh as refresh_centroid
from memory.retrieval.context import drop_windows, lexemes_around, lock_windows, refresh_context
from memory.retrieval.models import RecordContext, RetrievalLog, SubjectCentroid, SubjectIndex, TermBucket
from memory.retrieval.subject_index import (
    delete_statistics,
    queue_maintenance,
    recount_statistics,
    refresh_statistics,
)
from memory.search import TEXT_SEARCH_CONFIG


def _phrases(target: DeletionTarget) -> tuple[str, dict[str, str]]:
    """One tsquery matching any marker's words in order (the english configuration, as records are searched),
    as SQL text and its parameters. A log quotes a marker when its query, or one of its provider entries' text,
    matches: the purge blanks exactly those parts and the check looks for exactly those parts, so what the
    purge leaves the check never counts."""
    markers = [m for m in target.markers if m and m.strip()]
    sql = " || ".join(f"phraseto_tsquery(%(config)s::regconfig, %(m{i})s)" for i in range(len(markers)))
    return f"({sql})", {f"m{i}": m for i, m in enumerate(markers)}


# Both statements find the subject's logs through the GIN index on ``quotes`` (migration 0005): their cost is the
# number of logs that quote the words, not the number of logs the subject has.
_PURGE_QUOTING_LOGS = """
UPDATE retrieval_retrievallog l
SET query = CASE WHEN to_tsvector(%(config)s::regconfig, l.query) @@ {q} THEN '' ELSE l.query END,
    candidates = (SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb)
                  FROM jsonb_array_elements(l.candidates) WITH ORDINALITY AS t(e, n)
                  WHERE NOT (e ? 'text' AND to_tsvector(%(config)s::regconfig, coalesce(e->>'text', '')) @@ {q}))
WHERE l.tenant_id = %(tenant)s AND l.subject_id = %(subject)s AND l.quotes @@ {q}
"""

_QUOTING_LOGS = """
SELECT l.id FROM retrieval_retrievallog l
WHERE l.tenant_id = %(tenant)s AND l.subject_id = %(subject)s AND l.quotes @@ {q}
  AND (to_tsvector(%(config)s::regconfig, l.query) @@ {q}
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.candidates) e
                  WHERE e ? 'text' AND to_tsvector(%(config)s::regconfig, coalesce(e->>'text', '')) @@ {q}))
LIMIT 20
"""


def _statement(template: str, target: DeletionTarget) -> tuple[str, dict[str, Any]]:
    q, params = _phrases(target)
    return template.format(q=q), {**params, "config": TEXT_SEARCH_CONFIG, "tenant": target.tenant_id,
                                  "subject": target.subject_id}


@purge_surface("retrieval_logs", order=30)
@transaction.atomic
def purge_retrieval_logs(target: DeletionTarget) -> int:
    """Whole subject: delete its logs. One record: blank a query that quotes its words and drop the provider
    entries that do, in one indexed statement. Logs that only name the record by id keep the id (an id is not
    content; their readers see the record as deleted)."""
    logs = RetrievalLog.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    if target.whole_subject:
        deleted, _ = logs.delete()
        return deleted
    if not any(m.strip() for m in target.markers):
        return 0
    sql, params = _statement(_PURGE_QUOTING_LOGS, target)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


@read_check("retrieval_logs")
def check_retrieval_logs(target: DeletionTarget) -> list[str]:
    """The subject's logs whose query or provider entries still quote a marker (one indexed query); for an
    erasure, any log of the subject."""
    if target.whole_subject:
        return [f"retrieval log {pk}" for pk in RetrievalLog.objects.filter(
            tenant_id=target.tenant_id, subject_id=target.subject_id).values_list("pk", flat=True)[:20]]
    if not any(m.strip() for m in target.markers):
        return []
    sql, params = _statement(_QUOTING_LOGS, target)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [f"retrieval log {pk}" for (pk,) in cursor.fetchall()]


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
    # The subject's window lock before any of its rows: a worker deriving windows holds the lock and then writes
    # these rows, so taking the rows first and the lock second (inside refresh_context) could deadlock with it.
    lock_windows([target.subject_id])
    quoting = list(_windows(target).values_list("record_id", flat=True))
    # With the windows go their copies on the records' rows (blended vectors, lexemes), which hold the deleted turns'
    # too; derived again below.
    deleted = drop_windows(quoting)
    if not target.whole_subject:
        refresh_context([i for i in quoting if i not in set(target.memory_ids)])
    return deleted


@read_check("context_windows")
def check_context_windows(target: DeletionTarget) -> list[str]:
    """A window that still quotes a deleted record (or, for an erasure, any window of the subject), and a record
    that still holds a copy of a window's lexemes without having that window (the copies are written and cleared
    with the windows, so a deleted window's words can only survive there)."""
    windows = [f"context window of {record_id}" for record_id in _windows(target).values_list("record_id", flat=True)]
    copies = (MemoryRecord.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id,
                                          context_terms__isnull=False)
              .exclude(pk__in=RecordContext.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
                       .values("record_id")))
    return windows + [f"window lexemes of {record_id}" for record_id in copies.values_list("pk", flat=True)[:20]]


@on_plan("search_statistics")
def statistics_words_on_plan(target: DeletionTarget) -> list[str] | None:
    """The lexemes whose counts the deletion changes in a large subject's statistics, read while the records still
    hold them (None for a subject without statistics: nothing to count again)."""
    if not SubjectIndex.objects.filter(subject_id=target.subject_id).exists():
        return None
    return lexemes_around(target.memory_ids)


@purge_surface("search_statistics", order=87)
def purge_search_statistics(target: DeletionTarget) -> int:
    """A large subject's term statistics count the words of its live records: counted again now, after the records
    (85) and context windows (86) steps, so that a deleted record's words stay only where a live record also says
    them. Only the lexemes the plan read from the deleted records and the turns around them are counted again (with
    every bucket's totals); a job planned without them (the subject had no statistics then) recomputes them all.
    An erasure deletes them with the subject's index row; its partial indexes are dropped by the worker on
    commit (DROP INDEX CONCURRENTLY cannot run in this step's transaction, and a plain DROP INDEX would lock the
    whole records table until the job's step commits). Until then they are unused: retrieval reads them only for
    a subject whose index row says ``ready``."""
    if not SubjectIndex.objects.filter(subject_id=target.subject_id).exists():
        return 0
    if not target.whole_subject:
        lexemes = target.sealed.get("search_statistics")
        if lexemes is None:
            return int(refresh_statistics(target.subject_id))
        return int(recount_statistics(target.subject_id, list(lexemes)))
    deleted = delete_statistics(target.subject_id)
    deleted += SubjectIndex.objects.filter(subject_id=target.subject_id).delete()[0]
    queue_maintenance(target.subject_id)  # queued on commit
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


@purge_surface("subject_centroid", order=88)
def purge_subject_centroid(target: DeletionTarget) -> int:
    """A subject's centroid is the mean of its live records' vectors (of one record, that record's vector): computed
    again from what is left once the records (85) and their windows (86) are gone; an erasure deletes it."""
    centroids = SubjectCentroid.objects.filter(subject_id=target.subject_id)
    if target.whole_subject:
        return centroids.delete()[0]
    if not centroids.exists():
        return 0
    refresh_centroid(target.subject_id)
    return 1


@read_check("subject_centroid")
def check_subject_centroid(target: DeletionTarget) -> list[str]:
    """An erased subject's centroid left, or a centroid computed before the deletion (so with its records)."""
    centroid = SubjectCentroid.objects.filter(subject_id=target.subject_id).first()
    if centroid is None:
        return []
    if target.whole_subject:
        return ["the erased subject's centroid"]
    if target.requested_at is not None and centroid.updated_at < target.requested_at:
        return ["the subject's centroid, computed before the deletion"]
    return []
