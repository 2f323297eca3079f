"""How much derived work is still to be done: the caught-up signal behind health's ``derived_pending``.

Every derived surface is counted where its pending state is recorded, so the figure reaches zero only when
retrieval sees everything written: records waiting for their embedding, episodic records waiting for their
context windows (retrieval.PendingContext), large subjects whose own indexes or term statistics are due
(memory/retrieval/subject_index.py), server summaries that went stale and wait to be regenerated (or new ones
waiting for their embedding), and knowledge chunks waiting for theirs.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Q

from memory.knowledge.models import Chunk
from memory.retrieval.embedding import pending_records
from memory.retrieval.models import PendingContext
from memory.retrieval.subject_index import STATISTICS_DRIFT, threshold
from memory.threads.models import Summary

KINDS = ("embeddings", "context_windows", "subject_indexes", "summaries", "knowledge_chunks")

# A subject is due when it should have its own indexes and has none, or has them and they are not ready, or its
# statistics drifted, or it shrank below half the threshold (subject_index.needs_maintenance, in one statement).
_SUBJECT_INDEXES_DUE = """
SELECT count(*) FROM (
    SELECT coalesce(r.subject_id, i.subject_id) AS subject_id, coalesce(r.rows, 0) AS rows, i.subject_id AS indexed,
           i.ready, i.rows AS indexed_rows, i.statistics_at
    FROM (SELECT subject_id, count(*) AS rows FROM memory_memoryrecord GROUP BY subject_id
          HAVING count(*) >= %(half)s) r
    FULL JOIN retrieval_subjectindex i ON i.subject_id = r.subject_id
) s
WHERE (s.indexed IS NULL AND s.rows >= %(threshold)s)
   OR (s.indexed IS NOT NULL AND (s.rows < %(half)s OR NOT s.ready OR s.statistics_at IS NULL
                                  OR abs(s.rows - s.indexed_rows) > %(drift)s * greatest(s.indexed_rows, 1)))
"""


def _subject_indexes_due() -> int:
    limit = threshold()
    with connection.cursor() as cursor:
        cursor.execute(_SUBJECT_INDEXES_DUE, {"threshold": limit, "half": max(limit // 2, 1),
                                              "drift": STATISTICS_DRIFT})
        return int(cursor.fetchone()[0])


def _summaries_to_regenerate() -> int:
    # Stale server summaries wait for their regeneration; fresh ones with text wait for their embedding.
    stale = Q(status=Summary.Status.STALE, origin=Summary.Origin.SERVER, replaced_by__isnull=True)
    unembedded = Q(status=Summary.Status.FRESH, embedding__isnull=True) & ~Q(text="")
    return Summary.objects.filter(stale | unembedded).count()


def _chunks_to_embed() -> int:
    return Chunk.objects.filter(embedding__isnull=True).count()


def derived_pending_by_kind() -> dict[str, int]:
    return {
        "embeddings": pending_records().count(),
        "context_windows": PendingContext.objects.count(),
        "subject_indexes": _subject_indexes_due(),
        "summaries": _summaries_to_regenerate(),
        "knowledge_chunks": _chunks_to_embed(),
    }
