"""Memory candidates in one statement: both legs, the fusion, and the explanations.

Everything reads from one CTE, ``e``, over the scope's eligible records (memory/db/statements.py): tenant,
subject, namespace grant and the class's allowed readers (``MemoryRecord.objects.for_scope``'s predicates) are in
its WHERE clause, with validity (``live()``), servability and the task filters. Both legs score exactly the rows
of ``e``; nothing outside it can become a candidate. This module holds the scoring SQL; the scope's row sources,
the statement cache and the prepared execution are memory/db/statements.py's.

*Lexical leg: Okapi BM25 over the scope's own statistics.* ``ts_rank_cd`` has no inverse document
frequency, so a word found in every record (a speaker's name, "like") weighed as much as a rare one and
one weak shared word could outrank a strong paraphrase. Here N, the average length and each query term's
document frequency are counted over ``e`` in the same statement: the statistics of exactly what this
caller may read (no side channel from other subjects or classes), always current, with nothing to
maintain. Terms are the query's lexemes under the same text-search configuration as the stored vectors
(stemming, the configuration's stop words). A term's frequency in a record is its presence (memories are
short statements; counting occurrences measured no better and cost an unnest of every matching vector):
1 when the record's own text has it, plus CONTEXT_TERM_WEIGHT when its context window (RecordContext:
the turns around an episodic record; a copy of its lexemes is on the record's row) has it; lengths are distinct
lexemes, the window's at the same weight. The score is divided by its ceiling for this query,
``(k1 + 1) * sum(idf)``, so it lies in [0, 1] and means "how much of the query's information this record
carries": a record sharing one common word scores near 0 however few records there are, instead of being
stretched to 1 by max-normalisation.

*Semantic leg: exact cosine similarity over ``e``.* For a record with a context window the similarity is
OWN_WEIGHT * cos(query, record) + (1 - OWN_WEIGHT) * cos(query, window), the window's read from the record's
blended vector (``_window_distance``), so that a windowed turn is scored from its own row alone, as its window's
lexemes are (``context_terms``). Exact, never HNSW under a filter: pgvector 0.6 has no iterative index scans
and a filtered HNSW scan returns fewer rows than asked (measured: docs/retrieval.md); the ``+ 0`` keeps any index
on the column out of the plan.

*Large subjects* (memory/retrieval/subject_index.py, docs/retrieval.md "Large subjects"): past the threshold a
subject has its own partial HNSW and GIN indexes and BM25 statistics. The same statement then takes its candidates
from those indexes instead of every scoped row, still reads each through ``e``'s scoped CTE, takes N, the average
length and the document frequencies from the statistics of the buckets this scope may read, and answers only with
a full pool; otherwise the exact scan does.

*Fusion*: relevance = W_LEXICAL * lexical * gate + W_SEMANTIC * similarity (both absolute, in [0, 1]), the
gate being min(1, similarity / GATE_SIMILARITY); see ranking.py. The statement returns the best ``pool``
rows by relevance plus each leg's best ``limit`` (for the log), the scoped records that match but may not
be served (``excluded``: superseded, expired, deleted, or a candidate of a class that does not serve
candidates) and the number of eligible records whose embedding is still pending: one round trip.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import FloatField, Q, QuerySet, Value
from pgvector.django import CosineDistance

from memory.db.statements import (
    Filters,
    RetrievalStatement,
    StatementCache,
    fetch_one_prepared,
    scoped_sources,
    statement_key,
)
from memory.models import Confidence, MemoryRecord, RecordStatus
from memory.scope import Scope
from memory.search import TEXT_SEARCH_CONFIG, vector_literal

# The tunable choices come from settings.ENGRAM_RECALL (env ENGRAM_RECALL_*), so a benchmark can set them per run.
_TUNING = settings.ENGRAM_RECALL
K1, B = float(_TUNING["bm25_k1"]), float(_TUNING["bm25_b"])
CONTEXT_TERM_WEIGHT = float(_TUNING["context_term_weight"])  # a word said around a record: half a word of it
# Of a windowed record's similarity: the rest is the window's. Also the proportion of the stored blended vector
# (context.py), from which the window's share is read: a changed weight needs `reembed --all` to blend them again.
OWN_WEIGHT = float(_TUNING["own_weight"])
W_LEXICAL = float(_TUNING["w_lexical"])
W_SEMANTIC = 1.0 - W_LEXICAL
# Lexical evidence counts fully for a record at least this similar to the query, and proportionally less
# below: a word shared with a record whose meaning is unrelated is most likely a coincidence ("like").
# A record whose embedding is still pending has no similarity yet: its lexical evidence counts fully.
GATE_SIMILARITY = float(_TUNING["gate_similarity"])
# How much of a record's closeness to its subject's centroid is taken off its similarity (centroid.py).
GENERIC = float(_TUNING["generic"])
# A query word that no record contains is as informative as the rarest word, but in a handful of records
# BM25 would give it an IDF barely above a word found in half of them; in the ceiling it counts as in a
# corpus of at least this many records, so "the query asks about things memory never mentions" stays true.
UNSEEN_TERM_MIN_CORPUS = 100

@dataclass
class Candidate:
    """One eligible record as the statement scored it (a dict row; never a model instance)."""

    row: dict[str, Any]
    lexical: float | None  # normalised BM25 in [0, 1]; None when no query term occurs in it
    similarity: float | None  # None while its embedding is pending
    relevance: float
    lexical_rank: int | None
    semantic_rank: int | None
    in_conflict: bool


@dataclass
class SearchResult:
    candidates: list[Candidate]
    excluded: list[dict[str, Any]]
    pending: int
    indexed: bool = False  # answered through the subject's own indexes (else: every scoped row, exactly)


def _filtered(qs: QuerySet[MemoryRecord], filters: Filters) -> QuerySet[MemoryRecord]:
    if filters.namespaces is not None:
        qs = qs.under(filters.namespaces)  # type: ignore[attr-defined]
    if filters.kinds:
        qs = qs.filter(kind__in=filters.kinds)
    if filters.types:
        qs = qs.filter(memory_type__in=filters.types)
    if filters.fields:
        qs = qs.filter(field__in=filters.fields)
    if filters.source_types:
        qs = qs.filter(source_type__in=filters.source_types)
    return qs


def eligible(scope: Scope, filters: Filters) -> QuerySet[MemoryRecord]:
    """Scoped, live and servable: confirmed records, and candidates where the class allows serving them."""
    servable = Q(confidence=Confidence.CONFIRMED) | Q(confidence=Confidence.CANDIDATE,
                                                      memory_class__candidates_retrievable=True)
    return _filtered(MemoryRecord.objects.for_scope(scope).live().filter(servable), filters)


# Below this many records a subject's records are scored against the sum of the *other* records (see below); above
# it a record's own share of the sum is too small to matter, and the shifted query vector scores it in one operation.
OWN_SHARE_BELOW = 200


def _record_similarity(vector: str) -> str:
    """A record's similarity to the query in SQL: its cosine, less ``generic`` times how close it lies to the rest of
    its subject (centroid.py), plus the subject's average of that closeness.

    With ``x`` its cosine with the centroid's direction ``u`` and ``L`` the length of the sum of the subject's vectors,
    the other records' sum is ``L u - d``, and its cosine with ``d`` is ``(x L - 1) / sqrt(L² - 2 x L + 1)``: in a
    subject of a handful of records, without its own share a record is not "close to everything" merely by being one
    of them. That costs two more vector operations per record; in a larger subject the closeness is ``x`` itself (the
    difference is of the order of 1 / L), and ``cos(q, d) - g x`` is the cosine with the shifted query ``q - g u``,
    scaled: one operation, as without a centroid."""
    x = f"(-({vector} <#> q.dir))"
    others = f"(({x} * q.total - 1) / sqrt(greatest(q.total * q.total - 2 * {x} * q.total + 1, 1e-9)))"
    return (f"(CASE WHEN q.own_share THEN (1 - ({vector} <=> q.raw)) - q.generic * {others} + q.record_shift "
            f"ELSE q.scale * (1 - ({vector} <=> q.v)) + q.record_shift END)")


_SEARCH_SQL = """
WITH q AS MATERIALIZED (
    SELECT %(vector)s::vector AS raw, g.v, vector_norm(g.v) AS scale, g.dir, g.total, %(generic)s::float AS generic,
           g.own_share, g.record_shift, g.window_shift,
           t.terms, ARRAY(SELECT quote_literal(x)::tsquery FROM unnest(t.terms) x) AS tsqs,
           CASE WHEN cardinality(t.terms) > 0 THEN array_to_string(
               ARRAY(SELECT quote_literal(x) FROM unnest(t.terms) x), ' | ')::tsquery END AS tsq{ef_search}
    FROM (SELECT coalesce(ARRAY(SELECT DISTINCT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s))),
                          '{{}}'::text[]) AS terms) t,
         -- The subject's centroid (centroid.py) and the query shifted away from it, which orders windows (and the
         -- indexes' candidates) as their similarities do; with no centroid, the query itself (scale 1, offsets 0).
         -- Every similarity below is 1 - distance.
         (SELECT CASE WHEN c.direction IS NULL THEN %(vector)s::vector
                      ELSE %(vector)s::vector
                           - c.direction * array_fill(%(generic)s::real, ARRAY[vector_dims(c.direction)])::vector
                 END AS v, c.direction AS dir, c.total,
                 coalesce(c.records < {own_share_below}, false) AS own_share,
                 %(generic)s * CASE WHEN c.records < {own_share_below} THEN c.record_similarity
                                    ELSE coalesce(c.total / nullif(c.records, 0), 0) END AS record_shift,
                 %(generic)s * coalesce(c.window_similarity, 0) AS window_shift
          FROM (SELECT 1) one LEFT JOIN retrieval_subjectcentroid c ON c.subject_id = {subject}) g
),
-- Whether the subject has its own indexes and term statistics, ready (SubjectIndex; memory/retrieval/subject_index.py).
ix AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM retrieval_subjectindex si WHERE si.subject_id = {subject} AND si.ready)
           AND NOT %(exact)s AS ready
),
eligible ({e_columns}) AS NOT MATERIALIZED ({e_sql}),{indexed_ctes}
e AS MATERIALIZED (
    -- Distance, length and whether any query word occurs are computed while the scoped rows are read:
    -- the vectors never leave the scan, and only matching rows keep their text vector. A windowed turn's window
    -- is read from the turn's own row: its distance from the blended vector, its lexemes from their copy.
    SELECT {e_kept}, 1 - @RECORD_SIMILARITY(eligible.embedding) + 0 AS own_distance,
           length(eligible.search_vector) AS own_len,
           CASE WHEN eligible.search_vector @@ q.tsq THEN eligible.search_vector END AS own_match,
           @WINDOW_DISTANCE AS ctx_distance, length(eligible.context_terms) AS ctx_len,
           CASE WHEN eligible.context_terms @@ q.tsq THEN eligible.context_terms END AS around_match
    FROM eligible, q
    WHERE {e_where}
),
stats AS ({stats}),
-- Each matching row's term frequencies: 1 for a query word in its own text, the context weight for one in its window.
hits AS (
    SELECT * FROM (
        SELECT e.id, coalesce(e.own_len, 0) + %(context_weight)s * coalesce(e.ctx_len, 0) AS dl, t.term,
               coalesce((e.own_match @@ t.tsq)::int, 0)
               + %(context_weight)s * coalesce((e.around_match @@ t.tsq)::int, 0) AS tf
        FROM e, q, unnest(q.terms, q.tsqs) t(term, tsq)
        WHERE e.own_match IS NOT NULL OR e.around_match IS NOT NULL) h
    WHERE tf > 0
),
idf AS (
    SELECT t.term, ln(1 + (s.n - coalesce(d.df, 0) + 0.5) / (coalesce(d.df, 0) + 0.5)) AS idf,
           CASE WHEN d.df IS NULL THEN ln(1 + (greatest(s.n, %(unseen)s) + 0.5) / 0.5) END AS unseen_idf
    FROM q, unnest(q.terms) t(term)
    LEFT JOIN ({df}) d ON d.term = t.term,
    stats s
),
ceiling AS (SELECT (%(k1)s + 1) * sum(coalesce(unseen_idf, idf)) AS top FROM idf),
lex AS (
    SELECT h.id, sum(i.idf * h.tf * (%(k1)s + 1) / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.dl / s.avgdl)))
                 / nullif(max(ceiling.top), 0) AS lexical
    FROM hits h JOIN idf i ON i.term = h.term, stats s, ceiling
    GROUP BY h.id
),
-- Rows of r and lex are combined by UNION ALL and GROUP BY id, never joined: the planner cannot know how large one
-- subject is (its estimate is the average subject), and a nested loop over a misestimated join would be quadratic in
-- the subject's size.
scored AS (
    SELECT id, max(lexical) AS lexical,
           CASE WHEN max(ctx_distance) IS NULL THEN 1 - max(own_distance)
                ELSE %(own_weight)s * (1 - max(own_distance)) + (1 - %(own_weight)s) * (1 - max(ctx_distance))
           END AS similarity
    FROM (SELECT id, NULL::float AS lexical, own_distance, ctx_distance FROM e
          UNION ALL SELECT id, lexical, NULL, NULL FROM lex) u
    GROUP BY id
),
fused AS MATERIALIZED (
    SELECT id, lexical, similarity,
           %(w_lexical)s * coalesce(lexical, 0) * CASE WHEN similarity IS NULL THEN 1
                                             ELSE least(greatest(similarity, 0) / %(gate)s, 1) END
           + %(w_semantic)s * greatest(coalesce(similarity, 0), 0) AS relevance
    FROM scored WHERE lexical IS NOT NULL OR similarity IS NOT NULL  -- found by at least one leg
),
-- Each ordering keeps its best `pool` rows only (a top-N heap, not a sort of the whole scope), with their scores.
by_fused AS (
    SELECT *, row_number() OVER (ORDER BY relevance DESC, id) AS fused_rank
    FROM (SELECT * FROM fused ORDER BY relevance DESC, id LIMIT %(pool)s) t
),
by_lexical AS (
    SELECT *, row_number() OVER (ORDER BY lexical DESC, id) AS lexical_rank
    FROM (SELECT * FROM fused WHERE lexical IS NOT NULL ORDER BY lexical DESC, id LIMIT %(pool)s) t
),
by_semantic AS (
    SELECT *, row_number() OVER (ORDER BY similarity DESC, id) AS semantic_rank
    FROM (SELECT * FROM fused WHERE similarity IS NOT NULL ORDER BY similarity DESC, id LIMIT %(pool)s) t
),
-- The fused best, and each leg's best `limit`, with every rank a row has. Grouped, not joined: joins of these
-- CTEs were nested loops (their row counts are unknown to the planner), a few thousand comparisons per retrieve.
picked AS (
    SELECT id, max(lexical) AS lexical, max(similarity) AS similarity, max(relevance) AS relevance,
           min(fused_rank) AS fused_rank, min(lexical_rank) AS lexical_rank, min(semantic_rank) AS semantic_rank
    FROM (SELECT id, lexical, similarity, relevance, fused_rank, NULL::bigint AS lexical_rank,
                 NULL::bigint AS semantic_rank FROM by_fused
          UNION ALL SELECT id, lexical, similarity, relevance, NULL, lexical_rank, NULL FROM by_lexical
          UNION ALL SELECT id, lexical, similarity, relevance, NULL, NULL, semantic_rank FROM by_semantic) u
    GROUP BY id
    HAVING min(fused_rank) IS NOT NULL OR min(lexical_rank) <= %(limit)s OR min(semantic_rank) <= %(limit)s
),
x ({x_columns}) AS ({x_sql})
SELECT
    (SELECT coalesce(json_agg(json_build_object(
        'row', json_build_object({row_object}),
        'lexical', f.lexical, 'similarity', f.similarity, 'relevance', f.relevance,
        'lexical_rank', f.lexical_rank, 'semantic_rank', f.semantic_rank,
        'in_conflict', EXISTS (SELECT 1 FROM memory_conflict_records cr
                               JOIN memory_conflict cf ON cf.id = cr.conflict_id
                               WHERE cr.memoryrecord_id = f.id AND cf.status = 'open'))
        ORDER BY f.fused_rank NULLS LAST, f.relevance DESC, f.id), '[]')
     -- the packet's columns are read back for the picked rows only, through the same scoped CTE
     FROM picked f JOIN eligible el ON el.id = f.id),
    (SELECT coalesce(json_agg(to_jsonb(m) ORDER BY m.near NULLS LAST, m.id), '[]') FROM (
        SELECT x.id, x.namespace, x.kind, x.text, x.status, x.confidence, x.is_expired,
               x.max_retention_s, x.default_ttl_s, 1 - @RECORD_SIMILARITY(x.embedding) AS near
        FROM x, q
        WHERE {x_where} AND ((x.embedding IS NOT NULL
                              AND 1 - @RECORD_SIMILARITY(x.embedding) < %(max_distance)s)
                             OR x.search_vector @@ q.tsq)
        ORDER BY near NULLS LAST, x.id LIMIT %(pool)s) m),
    ({pending}),
    {answered},
    -- the subject's size when its statistics were last computed (NULL without its own indexes): how many vector
    -- candidates the next retrieve asks its indexes for
    (SELECT si.rows FROM retrieval_subjectindex si WHERE si.subject_id = {subject})
"""

def _window_distance(record: str) -> str:
    """A windowed record's window's distance to the query, from the record's own row: one less the window's
    similarity, scored with the shifted query and offset like a record's (centroid.py).

    The blended vector is ``w own/|own| + (1 - w) window/|window|`` (w the own weight; context.py writes it), so the
    window's similarity ``window/|window| . v`` (``v`` the shifted query; ``q.scale (1 - cos distance)`` is a unit
    vector's inner product with it) is ``(blended . v - w own/|own| . v) / (1 - w)``: two products with the row's
    own vectors instead of reading the window's row. NULL without a window (or with a weight of 1, where the
    window counts for nothing). "+ 0" keeps any index on the column out of the plan (see the module docstring)."""
    own = f"q.scale * (1 - ({record}.embedding <=> q.v))"
    return (f"1 - ((-({record}.blended_embedding <#> q.v) - %(own_weight)s * {own}) / nullif(1 - %(own_weight)s, 0)"
            f" + q.window_shift) + 0")


for _vector in ("eligible.embedding", "x.embedding"):
    _SEARCH_SQL = _SEARCH_SQL.replace(f"@RECORD_SIMILARITY({_vector})", _record_similarity(_vector))
_SEARCH_SQL = _SEARCH_SQL.replace("{own_share_below}", str(OWN_SHARE_BELOW))
_SEARCH_SQL = _SEARCH_SQL.replace("@WINDOW_DISTANCE", _window_distance("eligible"))

# The two variants of the statement's parts (memory/db/statements.RetrievalStatement composes them in). Scan:
# every scoped row, with BM25's statistics counted over them, unless the subject has its own indexes (then it
# scores nothing and says so).
_SCAN = {
    "ef_search": "",
    "subject": "%(subject)s",
    "indexed_ctes": "",
    "e_where": "NOT (SELECT ready FROM ix)",
    "stats": """
    SELECT count(*)::float AS n,
           greatest((coalesce(sum(own_len), 0) + %(context_weight)s * coalesce(sum(ctx_len), 0))
                    / greatest(count(*), 1), 1) AS avgdl
    FROM e
""",
    "df": "SELECT term, count(*)::float AS df FROM hits GROUP BY term",
    "x_where": "NOT (SELECT ready FROM ix)",
    "pending": "SELECT count(*) FROM e, q WHERE e.own_distance IS NULL AND e.embed_class AND q.v IS NOT NULL",
    # whether it answered: false when the subject's own indexes are to answer instead
    "answered": "NOT (SELECT ready FROM ix)",
}

# Indexed: the candidates are ids found through the subject's partial indexes, whose predicate is ``subject_id = S``;
# a partial index is only used when the query names S as a constant, so S is written into this variant's text.
# Every candidate is then read through ``eligible`` (every scope predicate applies) and scored exactly as the scan
# scores it, with BM25's N, average length and document frequencies taken from the statistics of the buckets this
# scope may read. It answers only with a full pool: when fewer candidates survive the scope predicates (or the
# subject is not ready), ``answered`` is false and the caller runs the exact scan instead.
_INDEXED = {
    # HNSW returns at most ef_search rows: raised for this statement's transaction only, before the index is read.
    "ef_search": ",\n           set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search",
    "subject": "{subject}",
    "indexed_ctes": """
buckets ({b_columns}) AS NOT MATERIALIZED ({b_sql}),
-- Each query term's document frequency in the buckets this scope may read.
tdf AS MATERIALIZED (
    SELECT t.term, sum(tc.records)::float AS df
    FROM q, unnest(q.terms) t(term) JOIN retrieval_termcount tc ON tc.lexeme = t.term
    WHERE tc.bucket_id IN (SELECT id FROM buckets)
    GROUP BY t.term
),
-- The lexical leg's candidates come through the subject's GIN indexes. Rare terms: every record holding one, the
-- rarest first while their postings fit the budget. The other (common) terms: the records holding all of them at
-- once, which BM25 ranks highest among those holding no rare term (measured: in a subject of 100,000 trips, each
-- city and month is in thousands of records and only their conjunction finds the trip asked about). A record with
-- only some of the common terms is still scored on every term when the vector leg brings it.
ranked AS MATERIALIZED (
    SELECT t.term, coalesce(d.df, 0) AS df,
           sum(coalesce(d.df, 0)) OVER (ORDER BY coalesce(d.df, 0), t.term) AS running
    FROM q, unnest(q.terms) t(term) LEFT JOIN tdf d ON d.term = t.term
),
rare AS MATERIALIZED (
    SELECT array_to_string(array_agg(quote_literal(term)), ' | ')::tsquery AS tsq
    FROM ranked WHERE running <= %(postings)s
),
every AS MATERIALIZED (
    SELECT array_to_string(array_agg(quote_literal(term)), ' & ')::tsquery AS tsq
    FROM ranked WHERE running > %(postings)s AND df > 0
),
found AS MATERIALIZED (
    SELECT r.id FROM memory_memoryrecord r
    WHERE r.subject_id = {subject} AND r.search_vector @@ (SELECT tsq FROM rare) AND (SELECT ready FROM ix)
    UNION
    (SELECT r.id FROM memory_memoryrecord r
     WHERE r.subject_id = {subject} AND r.search_vector @@ (SELECT tsq FROM every) AND (SELECT ready FROM ix)
     LIMIT %(postings)s)
    UNION
    SELECT rc.record_id FROM retrieval_recordcontext rc
    WHERE rc.subject_id = {subject} AND rc.terms @@ (SELECT tsq FROM rare) AND (SELECT ready FROM ix)
    UNION
    -- The vector leg's candidates, in the order the semantic leg scores them: the blended vector is a record's own
    -- and its window's in the leg's proportions, so its inner product with the shifted query is the record's
    -- similarity less a constant (blended_vector below; the records of large subjects are scored without their
    -- own share of the centroid).
    (SELECT r.id FROM memory_memoryrecord r WHERE r.subject_id = {subject} AND (SELECT ready FROM ix)
     ORDER BY @BLENDED <#> (SELECT v FROM q) LIMIT {vector_candidates})
),""",
    # A semi-join on the candidates: with ``id = ANY(array)`` the planner probed the primary key once per memory
    # class (7 × 205 probes; 11.5 ms against 7.5 ms for the whole statement at 100,000 records).
    "e_where": "eligible.id IN (SELECT id FROM found)",
    "stats": """
    SELECT coalesce(sum(b.records), 0)::float AS n,
           greatest(coalesce(sum(b.length), 0) / greatest(coalesce(sum(b.records), 0), 1), 1) AS avgdl
    FROM buckets b
""",
    "df": "SELECT term, df FROM tdf",
    # Only the candidates the eligible rows did not take can be excluded ones: usually none, so the records are
    # probed once per candidate (for e), not again here. Probed by ``id = ANY(array)`` over every candidate, a
    # generic plan read them once per memory class (7 × 787 probes, 12 ms of a 30 ms statement at 100,000 records).
    "x_where": "x.id IN (SELECT id FROM found EXCEPT SELECT id FROM e)",
    # The subject's unembedded live rows are few and have their own partial index (record_unembedded_idx).
    "pending": """SELECT count(*) FROM eligible, q
     WHERE eligible.id IN (SELECT r.id FROM memory_memoryrecord r WHERE r.subject_id = {subject}
                           AND r.embedding IS NULL AND r.status = 'active')
       AND eligible.embed_class AND q.v IS NOT NULL""",
    "answered": "(SELECT ready FROM ix) AND (SELECT count(*) FROM e) >= %(pool)s",
}

# The vector that a large subject's graph holds for each record (subject_index.PARTIAL_INDEXES): the blended vector
# of a record with a context window (MemoryRecord.blended_embedding), its own vector otherwise. The index is on this
# expression, so the statement orders by the same one.
def blended_vector(table: str = "") -> str:
    column = f"{table}." if table else ""
    return f"coalesce({column}blended_embedding, {column}embedding)"


_INDEXED["indexed_ctes"] = _INDEXED["indexed_ctes"].replace("@BLENDED", blended_vector("r"))

# A large subject's vector candidates: the HNSW index is asked for VECTOR_OVERFETCH times the pool (at least
# MIN_VECTOR_CANDIDATES, at most pgvector's ceiling for hnsw.ef_search), so that the scope predicates applied
# afterwards still leave a full pool; the lexical leg reads the records of the query's rarest terms through the GIN
# indexes, up to LEXICAL_POSTINGS_PER_POOL times the pool of them.
VECTOR_OVERFETCH = 4
MIN_VECTOR_CANDIDATES = 200
MAX_EF_SEARCH = 1000
LEXICAL_POSTINGS_PER_POOL = 10
# A retrieve that may read every namespace of a subject of fewer than SMALL_INDEXED_SUBJECT records asks the index
# for half as many: the candidates are most of the indexed statement's time (at 4,000 records, 12.7 ms with 200 per
# index, 8.4 ms with 100, when each subject had two graphs), and in subjects of 2,000 and 4,000 records 100 found the
# exact scan's top 10 in the same order for every query measured (docs/retrieval.md "Large subjects"). Larger
# subjects keep the wider search their HNSW graph needs, and a namespace grant or filter the overfetch its predicates
# need (a grant to a third of the subject left 33 of 100 vector candidates, fewer than the pool of 40, and the pool's
# tail ranked unlike the scan's).
SMALL_INDEXED_SUBJECT = 20_000
SMALL_SUBJECT_OVERFETCH = 2
MIN_SMALL_SUBJECT_CANDIDATES = 100

_E_COLUMNS = ("id", "embed_class")  # what the legs read; the rest is read back for the picked rows


_STATEMENTS_KEPT = 1024
_STATEMENTS: StatementCache[RetrievalStatement] = StatementCache(_STATEMENTS_KEPT)


def _compiled_statement(scope: Scope, filters: Filters) -> RetrievalStatement:
    """The statement for one scope and set of filters, built once per process (a small LRU, keyed on
    ``statement_key``: what the statement and its scope parameters are built from)."""
    return _STATEMENTS.get_or_build(statement_key(scope, filters), lambda: RetrievalStatement(
        scoped_sources(scope, filters), scope.subject_id, template=_SEARCH_SQL, scan=_SCAN, indexed=_INDEXED,
        kept=_E_COLUMNS))


def _vector_candidates(pool: int, rows: int | None = None, *, narrowed: bool = True) -> int:
    """How many rows the HNSW index is asked for: fewer for a subject known to be small (``rows``) when the scope
    is not ``narrowed`` to some of its namespaces."""
    if rows is not None and rows < SMALL_INDEXED_SUBJECT and not narrowed:
        return min(max(SMALL_SUBJECT_OVERFETCH * pool, MIN_SMALL_SUBJECT_CANDIDATES), MAX_EF_SEARCH)
    return min(max(VECTOR_OVERFETCH * pool, MIN_VECTOR_CANDIDATES), MAX_EF_SEARCH)


# Subjects this process has seen answered by their own indexes, with their size as the last answer gave it: their
# retrieves go to the indexed variant first (which says so when it cannot answer, and then the exact scan runs).
# Others start with the scan variant, which scores nothing when the subject turns out to have its own indexes.
_INDEXED_SUBJECTS: OrderedDict[int, int | None] = OrderedDict()


def _remember(subject_id: int, indexed: bool, rows: int | None = None) -> None:
    if indexed:
        _INDEXED_SUBJECTS[subject_id] = rows
        _INDEXED_SUBJECTS.move_to_end(subject_id)
        while len(_INDEXED_SUBJECTS) > _STATEMENTS_KEPT:
            _INDEXED_SUBJECTS.popitem(last=False)
    else:
        _INDEXED_SUBJECTS.pop(subject_id, None)


def search(scope: Scope, filters: Filters, query: str, vector: list[float], *, pool: int, limit: int,
           max_distance: float, exact: bool = False) -> SearchResult:
    """The memory leg of retrieve: one statement (see the module docstring). ``exact`` scores every scoped row even
    when the subject has its own indexes (the reference the tests and the benchmark compare the indexed path with).
    """
    compiled = _compiled_statement(scope, filters)
    # No vector (the embedding model is down): q.v is NULL, every distance is NULL, the lexical leg alone ranks,
    # and the pending count is the caller's to take (semantic_pending below).
    params = {**compiled.params, "vector": vector_literal(vector) if vector else None, "config": TEXT_SEARCH_CONFIG,
              "query": query, "context_weight": CONTEXT_TERM_WEIGHT, "unseen": UNSEEN_TERM_MIN_CORPUS, "k1": K1,
              "b": B, "own_weight": OWN_WEIGHT, "w_lexical": W_LEXICAL, "gate": GATE_SIMILARITY,
              "w_semantic": W_SEMANTIC, "pool": pool, "limit": limit, "max_distance": max_distance, "exact": exact,
              "postings": LEXICAL_POSTINGS_PER_POOL * pool, "generic": GENERIC}
    # Task filters other than namespaces are not in the term statistics' buckets: such a retrieve is scored exactly.
    indexable = not exact and vector and not (filters.kinds or filters.types or filters.fields or filters.source_types)
    narrowed = scope.namespaces is not None or filters.namespaces is not None

    def through_indexes(rows: int | None) -> tuple[Any, ...]:
        """The indexed variant's answer for a subject of ``rows`` records (None: not known yet); the process
        remembers whether it answered, and the subject's size it gave."""
        wanted = _vector_candidates(pool, rows, narrowed=narrowed)
        answer = fetch_one_prepared(compiled.indexed(wanted), {**params, "ef_search": str(wanted)})
        _remember(scope.subject_id, bool(answer[3]), answer[4])
        return answer

    row: tuple[Any, ...] | None = None
    indexed = False
    if indexable and scope.subject_id in _INDEXED_SUBJECTS:
        row = through_indexes(_INDEXED_SUBJECTS[scope.subject_id])
        indexed = bool(row[3])
    if not indexed:
        # Exact when asked, when the indexes cannot serve this request, or when they just could not fill it.
        row = fetch_one_prepared(compiled.scan, {**params, "exact": exact or not indexable or row is not None})
        if not row[3]:  # the subject has its own indexes: they answer
            row = through_indexes(row[4])
            indexed = bool(row[3])
            if not indexed:  # fewer than a full pool survived the scope predicates: every scoped row, exactly
                row = fetch_one_prepared(compiled.scan, {**params, "exact": True})
    assert row is not None
    found, excluded, pending, _, _ = row
    found = json.loads(found) if isinstance(found, str) else found
    excluded = json.loads(excluded) if isinstance(excluded, str) else excluded
    candidates = [Candidate(row=_typed(f["row"]), lexical=f["lexical"], similarity=f["similarity"],
                            relevance=f["relevance"], lexical_rank=f["lexical_rank"],
                            semantic_rank=f["semantic_rank"], in_conflict=f["in_conflict"]) for f in found]
    if not vector:
        pending = semantic_pending(scope, filters)
    return SearchResult(candidates=candidates, excluded=[_reason(x) for x in excluded], pending=int(pending),
                        indexed=indexed)


def forget_indexed_subjects() -> None:
    """Forget which subjects this process has seen answered by their own indexes (tests)."""
    _INDEXED_SUBJECTS.clear()


def semantic_pending(scope: Scope, filters: Filters) -> int:
    """Eligible records without their embedding yet (counted on its own when no query vector was computed)."""
    return eligible(scope, filters).filter(embedding__isnull=True, memory_class__embed=True).count()


_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT")


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("valid_from", "created_at", "valid_until"):
        value = row.get(key)
        if isinstance(value, str) and _TIMESTAMP.match(value):
            row[key] = dt.datetime.fromisoformat(value)
    return row


def _reason(row: dict[str, Any]) -> dict[str, Any]:
    if row["status"] == RecordStatus.ACTIVE:
        row["reason"] = "expired" if row["is_expired"] else "candidate_not_retrievable"
    else:
        row["reason"] = row["status"]  # superseded / expired / deleted
    return row


def semantic_only(scope: Scope, filters: Filters, vector: list[float], k: int) -> list[MemoryRecord]:
    """The exact vector scan over the scope's own embeddings alone (benchmarks compare it with a naive scan)."""
    distance = CosineDistance("embedding", vector) + Value(0.0, output_field=FloatField())
    return list(eligible(scope, filters).filter(embedding__isnull=False).annotate(distance=distance)
                .only("id").order_by("distance", "pk")[:k])
