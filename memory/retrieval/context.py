"""Deriving each episodic record's context window (the RecordContext model explains what and why).

``refresh_context(ids)`` recomputes the windows of the given records and of every record whose window
reaches one of them (a new turn changes the windows of the turns before it), and writes only the
windows that changed: their neighbours' lexemes (in SQL) and the window's vector (by default its turns' own
vectors averaged by their length in tokens; with ENGRAM_CONTEXT_VECTOR=model, one batched model call over the
windows' texts). It runs on the worker after each write (memory.records.tasks.derive_context, queued by
memory/records/indexing.py), from ``manage.py reembed``, and from deletion. Idempotent; per subject it runs
under an advisory lock, so two workers refreshing the same conversation cannot write a stale window
over a newer one.

Only live records of embedded, unencrypted classes take part: a sealed text has no plaintext to
share with its neighbours (and gets no text vector either).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from memory.embedder import get_embedder
from memory.embedder_onnx import MAX_SEQ_LENGTH
from memory.locks import lock
from memory.retrieval.centroid import vectors_written
from memory.retrieval.embedding import embed_record_ids
from memory.retrieval.models import PendingContext, RecordContext
from memory.search import TEXT_SEARCH_CONFIG, vector_literal

WINDOW = 2  # records before and after
SESSION_GAP_MINUTES = 30  # a longer pause between two records starts a new session

# A turn's stream position: its source event's time (copied onto the record by the write gate), else when it
# became valid; the index record_stream_idx holds live turns in exactly this order.
_AT = "coalesce(r.occurred_at, r.valid_from)"
_SAME_STREAM = ("r.subject_id = t.subject_id AND r.namespace = t.namespace AND r.kind = t.kind "
                "AND r.memory_type = 'episodic' AND r.status = 'active'")
# The targets' windows and every window that reaches a target (the turns up to WINDOW on either side) need the
# turns up to 2 * WINDOW on either side of each target, and nothing more of the stream: each is read through the
# index with a LIMIT, so the cost of a batch does not depend on how long the conversation already is. A window is
# cut at a session boundary, which depends only on the gaps between the turns it spans, all of them read here.
_REACH = 2 * WINDOW


def _turns_around(source: str) -> str:
    """The live turns of each ``source`` row's stream up to _REACH before and after it (for a CTE's UNION), each read
    through the index with a LIMIT."""
    return f"""SELECT b.id FROM {source} t CROSS JOIN LATERAL (
        SELECT r.id FROM memory_memoryrecord r
        WHERE {_SAME_STREAM} AND ({_AT}, r.created_at, r.id) < (t.at, t.created_at, t.id)
        ORDER BY {_AT} DESC, r.created_at DESC, r.id DESC LIMIT {_REACH}) b
    UNION
    SELECT a.id FROM {source} t CROSS JOIN LATERAL (
        SELECT r.id FROM memory_memoryrecord r
        WHERE {_SAME_STREAM} AND ({_AT}, r.created_at, r.id) > (t.at, t.created_at, t.id)
        ORDER BY {_AT}, r.created_at, r.id LIMIT {_REACH}) a"""


_WINDOWS_SQL = f"""
WITH given AS MATERIALIZED (  -- by primary key: a partial index of live turns would be scanned whole for them
    SELECT r.id, r.subject_id, r.namespace, r.kind, {_AT} AS at, r.created_at, r.memory_type, r.status
    FROM memory_memoryrecord r WHERE r.id = ANY(%(ids)s)
), target AS (
    SELECT * FROM given WHERE memory_type = 'episodic' AND status = 'active'
), near AS (
    SELECT id FROM target
    UNION
{_turns_around("target")}
), stream AS (
    SELECT r.id, r.tenant_id, r.subject_id, r.namespace, r.kind, r.text, r.created_at, {_AT} AS at,
           r.embedding IS NOT NULL AS has_vector
    FROM memory_memoryrecord r
    JOIN near n ON n.id = r.id
    JOIN memory_memoryclass c ON c.id = r.memory_class_id
    WHERE c.embed AND NOT c.encryption_required
), starts AS (
    SELECT *, CASE WHEN at - lag(at) OVER w <= interval '{SESSION_GAP_MINUTES} minutes' THEN 0 ELSE 1 END AS starts
    FROM stream WINDOW w AS (PARTITION BY tenant_id, subject_id, namespace, kind ORDER BY at, created_at, id)
), sessions AS (
    SELECT *, sum(starts) OVER (PARTITION BY tenant_id, subject_id, namespace, kind
                                ORDER BY at, created_at, id) AS session
    FROM starts
), windows AS (
    SELECT id, tenant_id, subject_id, array_agg(id) OVER w AS ids, array_agg(text) OVER w AS texts,
           count(*) FILTER (WHERE has_vector) OVER w AS vectors
    FROM sessions
    WINDOW w AS (PARTITION BY tenant_id, subject_id, namespace, kind, session ORDER BY at, created_at, id
                 ROWS BETWEEN {WINDOW} PRECEDING AND {WINDOW} FOLLOWING)
)
SELECT w.id, w.tenant_id, w.subject_id, w.ids, w.texts, w.vectors, rc.window_hash
FROM windows w LEFT JOIN retrieval_recordcontext rc ON rc.record_id = w.id
WHERE w.id = ANY(%(ids)s) OR w.ids && %(ids)s
"""

# The window's lexemes without positions: retrieval only asks whether a window holds a word, and the shorter
# row stays inline with its embedding.
_UPSERT_SQL = f"""
WITH written AS (
INSERT INTO retrieval_recordcontext (record_id, tenant_id, subject_id, neighbours, terms, embedding, window_hash,
                                     updated_at)
SELECT v.id, v.tenant_id, v.subject_id, string_to_array(v.ids, ' '),
       strip(to_tsvector('{TEXT_SEARCH_CONFIG}', v.others)),
       coalesce(v.embedding::vector, (
           -- The turns' own vectors, each weighted by its length in tokens (pgvector has no scalar product: a
           -- constant vector of the weight, element by element). Not normalised: only its direction is ever read.
           SELECT sum(m.embedding * array_fill(w.weight, ARRAY[vector_dims(m.embedding)])::vector)
           FROM unnest(string_to_array(v.ids, ' '), string_to_array(v.weights, ' ')::real[]) AS w(id, weight)
           JOIN memory_memoryrecord m ON m.id = w.id AND m.embedding IS NOT NULL)),
       v.hash, now()
FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])
     AS v(id, tenant_id, subject_id, ids, others, embedding, weights, hash)
JOIN memory_memoryrecord r ON r.id = v.id AND r.status = 'active'
ON CONFLICT (record_id, tenant_id) DO UPDATE SET neighbours = EXCLUDED.neighbours, terms = EXCLUDED.terms,
    embedding = EXCLUDED.embedding, window_hash = EXCLUDED.window_hash, updated_at = EXCLUDED.updated_at
RETURNING record_id, tenant_id, embedding, terms
), blended AS (
    -- Each written window's record gets its blended vector (MemoryRecord.blended_embedding): its own vector and the
    -- window's, each of unit length, in the proportions of the semantic leg (OWN_WEIGHT in candidates.py); and a copy
    -- of the window's lexemes (context_terms). Retrieval scores the turn from its own row with these two.
    UPDATE memory_memoryrecord r SET context_terms = w.terms, blended_embedding = CASE
        WHEN r.embedding IS NULL OR w.embedding IS NULL THEN NULL
        ELSE r.embedding * array_fill((%s / vector_norm(r.embedding))::real, ARRAY[vector_dims(r.embedding)])::vector
             + w.embedding * array_fill(((1 - %s) / vector_norm(w.embedding))::real,
                                        ARRAY[vector_dims(w.embedding)])::vector END
    FROM written w WHERE r.id = w.record_id AND r.tenant_id = w.tenant_id
)
SELECT count(*) FROM written
"""
# A record that no longer has a window is scored on its own vector and its own words again.
_UNBLEND_SQL = ("UPDATE memory_memoryrecord SET blended_embedding = NULL, context_terms = NULL "
                "WHERE id = ANY(%s) AND (blended_embedding IS NOT NULL OR context_terms IS NOT NULL)")


def drop_windows(record_ids: list[str]) -> int:
    """Delete these records' windows and the copies their rows hold of them (the blended vector, the window's
    lexemes): each record is scored on its own vector and its own words until a window is derived for it again.
    Returns how many windows were deleted."""
    deleted, _ = RecordContext.objects.filter(record_id__in=record_ids).delete()
    with connection.cursor() as cursor:
        cursor.execute(_UNBLEND_SQL, [record_ids])
    return deleted


def own_weight() -> float:
    """The share of a windowed record's similarity that is its own vector's (ENGRAM_RECALL_OWN_WEIGHT)."""
    return float(settings.ENGRAM_RECALL["own_weight"])


def _hash(ids: list[str], texts: list[str], vectors: int | None = None) -> str:
    # From the turns' own vectors, a window changes when another of its turns gets its vector.
    parts = ids + texts + ([str(vectors)] if vectors is not None else [])
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def vectors_from_turns() -> bool:
    """Whether a window's vector is the token-weighted mean of its turns' own vectors (no second model pass over
    five times the text) rather than the model's embedding of the window's text (``ENGRAM_CONTEXT_VECTOR``)."""
    return settings.ENGRAM_CONTEXT_VECTOR == "mean"


def _turn_weight(text: str) -> int:
    # The model's sentence vector is the mean of its token vectors: a window read as one text weighs each turn by
    # its tokens (with the two markers every text gets, and no more than the model reads of one text).
    return min(get_embedder().count_tokens(text) + 2, MAX_SEQ_LENGTH)


def window_text(texts: list[str]) -> str:
    return "\n".join(texts)


def lock_windows(subject_ids: Iterable[int]) -> None:
    """The subjects' windows, locked for this transaction (re-entrant): whoever changes a subject's windows or its
    records' blends takes this first, so that two such transactions wait for each other instead of each holding rows
    the other needs."""
    lock(f"record-context:{subject_id}" for subject_id in subject_ids)


def refresh_context(record_ids: Iterable[str]) -> int:
    """Recompute the windows touching ``record_ids``; returns how many context rows were (re)written."""
    ids = sorted(set(record_ids))
    if not ids:
        return 0
    mean = vectors_from_turns()
    # The turns written get their own vectors first, outside the lock and the transaction (the embedding task
    # queued beside this one then finds nothing left to do): the windows are made of them (``mean``), and a
    # windowed turn's blended vector needs its own vector either way.
    embed_record_ids(ids)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT subject_id FROM memory_memoryrecord WHERE id = ANY(%s) ORDER BY subject_id",
                       [ids])
        subjects = [row[0] for row in cursor.fetchall()]
        lock_windows(subjects)
        cursor.execute(_WINDOWS_SQL, {"ids": ids})
        rows = cursor.fetchall()
        changed: list[tuple[Any, ...]] = []
        alone: list[str] = []
        for record_id, tenant_id, subject_id, window_ids, texts, vectors, stored_hash in rows:
            if len(window_ids) < 2:
                alone.append(record_id)  # nothing around it: no context
                continue
            digest = _hash(window_ids, texts, vectors if mean else None)
            if digest != stored_hash:
                others = [t for i, t in zip(window_ids, texts, strict=True) if i != record_id]
                changed.append((record_id, tenant_id, subject_id, window_ids, others, texts, digest))
        # Targets that are no longer live (or no longer episodic) keep no context either.
        live = {r[0] for r in rows}
        stale = alone + [i for i in ids if i not in live]
        if stale:
            drop_windows(stale)
        written = 0
        if changed:
            embeddings: list[str | None] = [None] * len(changed)
            weights: list[str | None] = [None] * len(changed)
            if mean:  # averaged in SQL from the turns' stored vectors
                # A turn is in up to five windows: each is counted once.
                turn_texts = {i: t for c in changed for i, t in zip(c[3], c[5], strict=True)}
                weight = {i: _turn_weight(t) for i, t in turn_texts.items()}
                weights = [" ".join(str(weight[i]) for i in c[3]) for c in changed]
            else:
                vectors_ = get_embedder().embed([window_text(c[5]) for c in changed], batch_size=64)
                embeddings = [vector_literal(v) for v in vectors_]
            cursor.execute(_UPSERT_SQL, [
                [c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed],
                [" ".join(c[3]) for c in changed], ["\n".join(c[4]) for c in changed],
                embeddings, weights, [c[6] for c in changed], own_weight(), own_weight(),
            ])
            written = int(cursor.fetchone()[0])
        # Derived in this transaction: no longer pending (health's derived_pending), with the centroids the new
        # windows move (after the markers go: a subject with nothing left pending gets its exact centroid).
        PendingContext.objects.filter(record_id__in=ids).delete()
        vectors_written({**dict.fromkeys(subjects, 0), **Counter(c[2] for c in changed)})
        return written


# The lexemes a record's removal can change in the subject's term statistics (memory/retrieval/subject_index.py):
# its own, and the words of the turns whose windows lose it, take in the next turn along or are cut where the gap
# it leaves starts a new session. Those turns are within WINDOW of it, so its own window holds their words; the
# turns up to _REACH on either side are read too, for a record whose window is not derived yet.
_LEXEMES_AROUND_SQL = f"""
WITH target AS (
    SELECT r.id, r.subject_id, r.namespace, r.kind, {_AT} AS at, r.created_at, r.memory_type
    FROM memory_memoryrecord r WHERE r.id = ANY(%(ids)s)
), turns AS (
    SELECT * FROM target WHERE memory_type = 'episodic'
), near AS (
    SELECT id FROM target
    UNION
{_turns_around("turns")}
)
SELECT DISTINCT lexeme FROM near n
JOIN memory_memoryrecord r ON r.id = n.id
LEFT JOIN retrieval_recordcontext rc ON rc.record_id = n.id
CROSS JOIN LATERAL unnest(coalesce(tsvector_to_array(r.search_vector), '{{}}')
                          || coalesce(tsvector_to_array(rc.terms), '{{}}')) AS lexeme
ORDER BY lexeme
"""


def lexemes_around(record_ids: Iterable[str]) -> list[str]:
    """Every lexeme whose count of holders (records holding it in their own text or their window) can change when
    ``record_ids`` stop being live: read while they still are."""
    ids = sorted(set(record_ids))
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_LEXEMES_AROUND_SQL, {"ids": ids})
        return [row[0] for row in cursor.fetchall()]


def records_quoting(record_ids: Iterable[str], *, tenant_id: int, subject_id: int) -> list[str]:
    """Records whose context window includes any of ``record_ids`` (their own rows included)."""
    ids = list(record_ids)
    return list(RecordContext.objects.filter(tenant_id=tenant_id, subject_id=subject_id, neighbours__overlap=ids)
                .values_list("record_id", flat=True))


def pending_count(*, tenant_slug_prefix: str | None = None) -> int:
    """Episodic records whose windows are still to be derived (for benchmarks and operators)."""
    qs = PendingContext.objects.all()
    if tenant_slug_prefix:
        qs = qs.filter(tenant__slug__startswith=tenant_slug_prefix)
    return qs.count()


def pending_ids(*, queued_before: Any) -> list[str]:
    """Records marked pending before then whose task was lost (a worker died, the queue was cleared)."""
    return list(PendingContext.objects.filter(queued_at__lt=queued_before).order_by("queued_at")
                .values_list("record_id", flat=True))
