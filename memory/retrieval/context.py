"""Deriving each episodic record's context window (the RecordContext model explains what and why).

``refresh_context(ids)`` recomputes the windows of the given records and of every record whose window
reaches one of them (a new turn changes the windows of the turns before it), and writes only the
windows that changed: their neighbours' lexemes (in SQL) and the embedding of the window's text (one
batched model call). It runs on the worker after each write (memory.records.tasks.derive_context, queued by
memory/records/indexing.py), from ``manage.py reembed``, and from deletion. Idempotent; per subject it runs
under an advisory lock, so two workers refreshing the same conversation cannot write a stale window
over a newer one.

Only live records of embedded, unencrypted classes take part: a sealed text has no plaintext to
share with its neighbours (and gets no text vector either).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from memory.embedder import get_embedder
from memory.models import MemoryRecord
from memory.retrieval.models import RecordContext
from memory.search import TEXT_SEARCH_CONFIG, vector_literal

WINDOW = 2  # records before and after
SESSION_GAP_MINUTES = 30  # a longer pause between two records starts a new session

_WINDOWS_SQL = f"""
WITH target AS (
    SELECT DISTINCT tenant_id, subject_id, namespace, kind FROM memory_memoryrecord
    WHERE id = ANY(%(ids)s) AND memory_type = 'episodic'
), stream AS (
    SELECT r.id, r.tenant_id, r.subject_id, r.namespace, r.kind, r.text, r.created_at,
           coalesce(e.occurred_at, r.valid_from) AS at
    FROM memory_memoryrecord r
    JOIN target t ON t.tenant_id = r.tenant_id AND t.subject_id = r.subject_id AND t.namespace = r.namespace
                 AND t.kind = r.kind
    JOIN memory_memoryclass c ON c.id = r.memory_class_id
    LEFT JOIN memory_event e ON e.id = r.source_event_id
    WHERE r.memory_type = 'episodic' AND r.status = 'active' AND c.embed AND NOT c.encryption_required
), starts AS (
    SELECT *, CASE WHEN at - lag(at) OVER w <= interval '{SESSION_GAP_MINUTES} minutes' THEN 0 ELSE 1 END AS starts
    FROM stream WINDOW w AS (PARTITION BY tenant_id, subject_id, namespace, kind ORDER BY at, created_at, id)
), sessions AS (
    SELECT *, sum(starts) OVER (PARTITION BY tenant_id, subject_id, namespace, kind
                                ORDER BY at, created_at, id) AS session
    FROM starts
), windows AS (
    SELECT id, tenant_id, subject_id, array_agg(id) OVER w AS ids, array_agg(text) OVER w AS texts
    FROM sessions
    WINDOW w AS (PARTITION BY tenant_id, subject_id, namespace, kind, session ORDER BY at, created_at, id
                 ROWS BETWEEN {WINDOW} PRECEDING AND {WINDOW} FOLLOWING)
)
SELECT w.id, w.tenant_id, w.subject_id, w.ids, w.texts, rc.window_hash
FROM windows w LEFT JOIN retrieval_recordcontext rc ON rc.record_id = w.id
WHERE w.id = ANY(%(ids)s) OR w.ids && %(ids)s
"""

# The window's lexemes without positions: retrieval only asks whether a window holds a word, and the shorter
# row stays inline with its embedding.
_UPSERT_SQL = f"""
INSERT INTO retrieval_recordcontext (record_id, tenant_id, subject_id, neighbours, terms, embedding, window_hash,
                                     updated_at)
SELECT v.id, v.tenant_id, v.subject_id, string_to_array(v.ids, ' '),
       strip(to_tsvector('{TEXT_SEARCH_CONFIG}', v.others)), v.embedding::vector, v.hash, now()
FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[])
     AS v(id, tenant_id, subject_id, ids, others, embedding, hash)
JOIN memory_memoryrecord r ON r.id = v.id AND r.status = 'active'
ON CONFLICT (record_id) DO UPDATE SET neighbours = EXCLUDED.neighbours, terms = EXCLUDED.terms,
    embedding = EXCLUDED.embedding, window_hash = EXCLUDED.window_hash, updated_at = EXCLUDED.updated_at
"""


def _hash(ids: list[str], texts: list[str]) -> str:
    return hashlib.sha256("\x1f".join(ids + texts).encode()).hexdigest()


def window_text(texts: list[str]) -> str:
    return "\n".join(texts)


def refresh_context(record_ids: Iterable[str]) -> int:
    """Recompute the windows touching ``record_ids``; returns how many context rows were (re)written."""
    ids = sorted(set(record_ids))
    if not ids:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT subject_id FROM memory_memoryrecord WHERE id = ANY(%s) ORDER BY subject_id",
                       [ids])
        for (subject_id,) in cursor.fetchall():
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"record-context:{subject_id}"])
        cursor.execute(_WINDOWS_SQL, {"ids": ids})
        rows = cursor.fetchall()
        changed: list[tuple[Any, ...]] = []
        alone: list[str] = []
        for record_id, tenant_id, subject_id, window_ids, texts, stored_hash in rows:
            if len(window_ids) < 2:
                alone.append(record_id)  # nothing around it: no context
                continue
            digest = _hash(window_ids, texts)
            if digest != stored_hash:
                others = [t for i, t in zip(window_ids, texts, strict=True) if i != record_id]
                changed.append((record_id, tenant_id, subject_id, window_ids, others, texts, digest))
        # Targets that are no longer live (or no longer episodic) keep no context either.
        live = {r[0] for r in rows}
        stale = alone + [i for i in ids if i not in live]
        if stale:
            RecordContext.objects.filter(record_id__in=stale).delete()
        if not changed:
            return 0
        vectors = get_embedder().embed([window_text(c[5]) for c in changed], batch_size=64)
        cursor.execute(_UPSERT_SQL, [
            [c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed],
            [" ".join(c[3]) for c in changed], ["\n".join(c[4]) for c in changed],
            [vector_literal(v) for v in vectors], [c[6] for c in changed],
        ])
        return int(cursor.rowcount)


def records_quoting(record_ids: Iterable[str], *, tenant_id: int, subject_id: int) -> list[str]:
    """Records whose context window includes any of ``record_ids`` (their own rows included)."""
    ids = list(record_ids)
    return list(RecordContext.objects.filter(tenant_id=tenant_id, subject_id=subject_id, neighbours__overlap=ids)
                .values_list("record_id", flat=True))


def pending_count(*, tenant_slug_prefix: str | None = None) -> int:
    """Live episodic records of embedded classes with no context row yet (for benchmarks and operators;
    a record alone in its session legitimately has none)."""
    qs = MemoryRecord.objects.filter(memory_type="episodic", status="active", memory_class__embed=True,
                                     memory_class__encryption_required=False)
    if tenant_slug_prefix:
        qs = qs.filter(tenant__slug__startswith=tenant_slug_prefix)
    return qs.exclude(pk__in=RecordContext.objects.values("record_id")).count()
