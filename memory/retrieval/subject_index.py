"""A large subject's own search structures: partial indexes over its rows only, and its BM25 statistics.

Every retrieve reads one subject. Below ``ENGRAM_SUBJECT_INDEX_THRESHOLD`` records the memory statement scores all
of the subject's rows exactly (memory/retrieval/candidates.py): about 10-17 µs per row, so 100,000 records would
take more than a second. Past the threshold the worker builds, for that subject alone:

- HNSW indexes on the records' and the context windows' embeddings, ``WHERE subject_id = S``: the vector leg reads
  the nearest few hundred rows of the subject instead of all of them. A table-wide HNSW index would not do:
  pgvector 0.6 has no iterative scans, so a scan filtered to one subject returns fewer rows than asked. A partial
  index holds this subject's rows only, and the statement still scans exactly whenever the rows it found leave
  fewer than a full pool after the scope predicates;
- GIN indexes on their text vectors, so the lexical leg reads only the records holding the query's rarer terms;
- the term statistics of Okapi BM25 (TermBucket, TermCount): records, total length and each lexeme's document
  frequency per namespace and memory class, so a retrieve sums the buckets its scope may read instead of counting
  over every row.

Indexes are built ``CONCURRENTLY`` (writes to the subject go on meanwhile) and the subject is ``ready`` only when
every one is valid and the statistics are written. A subject that shrinks below half the threshold loses them
(half, so that one at the threshold does not build and drop them in turn). The statistics are recomputed when the
subject's row count has moved by more than STATISTICS_DRIFT since, and at once by deletion and ``manage.py
reembed``; in between they describe the subject as it was, which moves BM25's weights by about that share.

At most ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS subjects have their own indexes at once: every partial index on a shared
table is weighed whenever PostgreSQL plans a statement on it, whichever subject the statement reads (measured in
bench/subject_indexes.py: planning a record's read by id took 3 times as long with 100 subjects indexed, 30 times
with 500). When every place is taken, a subject takes the place of the smallest indexed one only if it holds at least
DISPLACE_FACTOR times its rows; the others past the threshold are scored by the exact scan, and each sweep logs how
many wait.

Entry points: ``maintain(subject_id)`` (the task; idempotent), ``after_writes_to(record_ids)`` (the worker's
embedding and context tasks: queues ``maintain`` only for a subject that needs it), ``sweep()`` (the schedule and
``manage.py index_subjects``), ``refresh_statistics(subject_id)``, ``drop(subject_id)``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memory.db.statistics import analyse, stale_tables
from memory.locks import lock, session_unlock, try_session_lock
from memory.models import Subject
from memory.queues import BULK, enqueue
from memory.retrieval.candidates import CONTEXT_TERM_WEIGHT, blended_vector
from memory.retrieval.models import PendingMaintenance, RecordContext, SubjectIndex, TermBucket, TermCount
from memory.retrieval.pending import pending_records

logger = logging.getLogger(__name__)

# The statistics are recomputed when the subject's row count has moved by more than this share since they were.
STATISTICS_DRIFT = 0.01
# Maintenance waits while a subject's import is still being embedded: while more than SETTLING_ROWS of its live
# records, or more than SETTLING_SHARE of them, still wait for their embedding. An HNSW index built then takes every
# later embedding as an insert, which measured many times slower than building it once over the embedded rows, and
# the statistics would be recomputed after every batch of the import. The share alone let a large import build too
# soon: 5% of 100,000 turns is eight 500-record tasks, and the one bulk worker, which takes queued tasks in no fixed
# order, ran the build first (40 s in which no vector was written, then those turns at a third of the speed;
# docs/benchmarks.md). SETTLING_ROWS is slack for a subject written to all the time. The embedding task that leaves
# the subject within both bounds queues the maintenance; the schedule finds it otherwise.
SETTLING_SHARE = 0.05
SETTLING_ROWS = 20


@dataclass(frozen=True)
class PartialIndex:
    suffix: str
    table: str
    method: str  # USING ...


# The vector index: one graph over each record's blended vector (its own vector where it has no window), by inner
# product. Its order is the semantic leg's own (candidates.py): a record and its window no longer need a graph each,
# which found fewer of the exact order's best rows from twice the candidates, and were two graphs to build
# (docs/retrieval.md, "Large subjects"). The statement orders by the same expression (candidates.blended_vector).
PARTIAL_INDEXES = (
    PartialIndex("bv", "memory_memoryrecord", f"hnsw (({blended_vector()}) vector_ip_ops)"),
    PartialIndex("rt", "memory_memoryrecord", "gin (search_vector)"),
    PartialIndex("ct", "retrieval_recordcontext", "gin (terms)"),
)
_PREFIX = "retrieval_subject_"


def threshold() -> int:
    return int(settings.ENGRAM_SUBJECT_INDEX_THRESHOLD)


def capacity() -> int:
    return int(settings.ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS)


# A subject past the threshold takes a place from the smallest indexed subject only when it holds at least this many
# times its rows: the displaced subject can then never take the place back (it is at most half of every subject still
# indexed), so two subjects of about the same size do not rebuild their indexes in turn.
DISPLACE_FACTOR = 2


def has_room(subject_id: int, rows: int) -> tuple[bool, int | None]:
    """Whether a subject of ``rows`` records without indexes may have them now, and which indexed subject it
    displaces to get them (None while fewer than ``capacity()`` subjects are indexed)."""
    others = SubjectIndex.objects.exclude(subject_id=subject_id)
    if others.count() < capacity():
        return True, None
    smallest = others.order_by("rows", "subject_id").values_list("subject_id", "rows").first()
    if smallest is not None and rows >= DISPLACE_FACTOR * max(smallest[1], 1):
        return True, smallest[0]
    return False, None


def index_name(subject_id: int, index: PartialIndex) -> str:
    return f"{_PREFIX}{int(subject_id)}_{index.suffix}"


def subject_rows(subject_id: int) -> int:
    """The subject's records of any status (read from the scope index)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_memoryrecord WHERE subject_id = %s", [subject_id])
        return int(cursor.fetchone()[0])


def existing_indexes(subject_id: int) -> dict[str, bool]:
    """This subject's partial indexes by name, with whether each is valid (a failed concurrent build leaves an
    invalid one behind, which the planner ignores and the next run replaces)."""
    return _partial_indexes(f"{int(subject_id)}")


def _partial_indexes(subject_pattern: str) -> dict[str, bool]:
    """The subject partial indexes whose subject id matches ``subject_pattern`` (a regular expression), by name, with
    whether each is valid."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname ~ %s", [f"^{_PREFIX}{subject_pattern}_[a-z]+$"])
        return dict(cursor.fetchall())


def _subject_of(index: str) -> int:
    return int(index.removeprefix(_PREFIX).split("_", 1)[0])


def _concurrently() -> str:
    # CONCURRENTLY keeps the table writable during a build, and cannot run inside a transaction (tests run in one).
    return "" if connection.in_atomic_block else "CONCURRENTLY "


# The memory a build is given: pgvector keeps the HNSW graph in it while it builds, about 2.2 kB per vector of 384
# dimensions (16 MB held 7,448 of them), and past it goes on on disk: a 10,000-record graph took 1.4 s with 16 MB
# against 0.6 s with 64 MB, and one of 100,000 was about 3.5 times faster with 1 GB than with 64 MB. So twice that
# per row, at least 64 MB and at most ENGRAM_SUBJECT_INDEX_BUILD_MEMORY. No more: with 1 GB the parallel build
# first sets up a shared segment of that size, and a 1,000-record subject's graph took 210 ms against 90 ms with
# 64 MB; at 100,000 records 400 MB and 1 GB took the same 5.0 s.
BUILD_MEMORY_PER_ROW = 4096
MIN_BUILD_MEMORY = 64 * 1024 * 1024


def build_memory_kb(rows: int) -> int:
    """maintenance_work_mem for building the indexes of a subject of ``rows`` records, in kB."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT (greatest(least(pg_size_bytes(%s), %s), %s) / 1024)::bigint",
                       [settings.ENGRAM_SUBJECT_INDEX_BUILD_MEMORY, rows * BUILD_MEMORY_PER_ROW, MIN_BUILD_MEMORY])
        return int(cursor.fetchone()[0])


def _build(subject_id: int, index: PartialIndex, rows: int) -> None:
    name = index_name(subject_id, index)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {_concurrently()}IF EXISTS {name}")
        cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [f"{build_memory_kb(rows)}kB"])
        try:
            cursor.execute(f"CREATE INDEX {_concurrently()}{name} ON {index.table} USING {index.method} "
                           f"WHERE subject_id = {int(subject_id)}")
        finally:
            cursor.execute("RESET maintenance_work_mem")


# The planner's own statistics of the tables the indexed statement reads. Taken before the subject grew (a new
# installation's tables are analysed empty, and autovacuum analyses again a minute later at the earliest, in a large
# table only once a tenth of it changed), they say the subject has a handful of rows: the indexed statement then read
# every row of the subject once per candidate, 540 ms a retrieve at 10,000 records against 22 ms once analysed. So
# the tables are analysed when a subject's indexes are built, before it is marked ready, if their statistics are
# stale (memory/db/statistics.py). Not always: ANALYZE reads a fixed sample (about 30,000 rows at the default
# statistics target) whatever the table's size, 0.7 s for both tables at 125,000 records, about as long as building
# a small subject's four indexes, and a subject that is a small share of a table the planner already knows changes
# nothing it plans with.


def analyse_tables(subject_id: int, rows: int) -> list[str]:
    """ANALYZE those of the records and windows tables whose statistics the subject's ``rows`` records and its
    windows leave stale; returns the ones analysed (none when another maintenance held them past the lock
    timeout)."""
    windows = RecordContext.objects.filter(subject_id=subject_id).count()
    stale = tuple(stale_tables(("memory_memoryrecord",), rows_written=rows)
                  + stale_tables(("retrieval_recordcontext",), rows_written=windows))
    return list(stale) if stale and analyse(stale) else []


def delete_statistics(subject_id: int) -> int:
    deleted = TermCount.objects.filter(bucket__subject_id=subject_id).delete()[0]
    return deleted + TermBucket.objects.filter(subject_id=subject_id).delete()[0]


def drop(subject_id: int) -> None:
    """Forget a subject's indexes and statistics (it shrank, or it was erased)."""
    with transaction.atomic():
        _forget(subject_id)
    _drop_indexes(subject_id)


def _forget(subject_id: int) -> None:
    """The subject's SubjectIndex row and statistics, in the caller's transaction: its retrieves scan from then on."""
    SubjectIndex.objects.filter(subject_id=subject_id).delete()
    delete_statistics(subject_id)


def _drop_obsolete(subject_id: int, existing: dict[str, bool]) -> None:
    """Drop the subject's partial indexes of kinds no longer built (an earlier version's), after their
    replacements."""
    wanted = {index_name(subject_id, i) for i in PARTIAL_INDEXES}
    with connection.cursor() as cursor:
        for name in sorted(set(existing) - wanted):
            cursor.execute(f"DROP INDEX {_concurrently()}IF EXISTS {name}")


def _drop_indexes(subject_id: int) -> None:
    with connection.cursor() as cursor:
        for name in existing_indexes(subject_id):
            cursor.execute(f"DROP INDEX {_concurrently()}IF EXISTS {name}")


# The rows a retrieve scores, at refresh time: live (active, inside validity) and servable. A record's length and
# its terms are counted as the lexical leg counts them: its own lexemes, plus its window's at CONTEXT_TERM_WEIGHT for
# the length and as "holds the term" for the document frequency.
_LIVE_SQL = """
    SELECT r.tenant_id, r.namespace, r.memory_class_id, r.search_vector AS own, rc.terms AS around
    FROM memory_memoryrecord r
    JOIN memory_memoryclass c ON c.id = r.memory_class_id
    LEFT JOIN retrieval_recordcontext rc ON rc.record_id = r.id
    WHERE r.subject_id = %(subject)s AND r.status = 'active' AND (r.valid_until IS NULL OR r.valid_until > now())
      AND (r.confidence = 'confirmed' OR (r.confidence = 'candidate' AND c.candidates_retrievable))
"""
_BUCKET_TOTALS = """min(tenant_id), %(subject)s, namespace, memory_class_id, count(*),
           sum(coalesce(length(own), 0) + %(context_weight)s * coalesce(length(around), 0))"""
_HOLDS = """CROSS JOIN LATERAL (SELECT unnest(tsvector_to_array(l.own))
                    UNION SELECT unnest(tsvector_to_array(l.around))) t(lexeme)"""

_STATISTICS_SQL = f"""
WITH live AS MATERIALIZED ({_LIVE_SQL}),
buckets AS (
    INSERT INTO retrieval_termbucket (tenant_id, subject_id, namespace, memory_class_id, records, length)
    SELECT {_BUCKET_TOTALS}
    FROM live GROUP BY namespace, memory_class_id
    RETURNING id, tenant_id, namespace, memory_class_id
)
INSERT INTO retrieval_termcount (bucket_id, tenant_id, lexeme, records)
SELECT b.id, b.tenant_id, t.lexeme, count(*)
FROM live l
JOIN buckets b ON b.namespace = l.namespace AND b.memory_class_id = l.memory_class_id
{_HOLDS}
WHERE t.lexeme IS NOT NULL
GROUP BY b.id, b.tenant_id, t.lexeme
"""

# Part of the statistics counted again in one pass over the subject's live rows: every bucket's totals, and the
# counts of the given lexemes (cleared first) from the rows that hold one of them. Returns the buckets kept.
_LEXEME_COUNTS_CLEARED_SQL = """
DELETE FROM retrieval_termcount tc USING retrieval_termbucket b
WHERE tc.bucket_id = b.id AND b.subject_id = %(subject)s AND tc.lexeme = ANY(%(lexemes)s)
"""
_RECOUNT_SQL = f"""
WITH live AS MATERIALIZED ({_LIVE_SQL}),
q AS (
    SELECT array_to_string(ARRAY(SELECT quote_literal(x) FROM unnest(%(lexemes)s::text[]) x), ' | ')::tsquery AS tsq
),
buckets AS (
    INSERT INTO retrieval_termbucket (tenant_id, subject_id, namespace, memory_class_id, records, length)
    SELECT {_BUCKET_TOTALS}
    FROM live GROUP BY namespace, memory_class_id
    ON CONFLICT (subject_id, namespace, memory_class_id, tenant_id)
    DO UPDATE SET records = EXCLUDED.records, length = EXCLUDED.length
    RETURNING id, tenant_id, namespace, memory_class_id
),
counts AS (
    INSERT INTO retrieval_termcount (bucket_id, tenant_id, lexeme, records)
    SELECT b.id, b.tenant_id, t.lexeme, count(*)
    FROM live l
    JOIN buckets b ON b.namespace = l.namespace AND b.memory_class_id = l.memory_class_id
    {_HOLDS}
    WHERE cardinality(%(lexemes)s::text[]) > 0 AND (l.own @@ (SELECT tsq FROM q) OR l.around @@ (SELECT tsq FROM q))
      AND t.lexeme = ANY(%(lexemes)s)
    GROUP BY b.id, b.tenant_id, t.lexeme
)
SELECT id FROM buckets
"""
_EMPTIED_BUCKETS_SQL = """
WITH gone AS (SELECT id FROM retrieval_termbucket WHERE subject_id = %(subject)s AND NOT id = ANY(%(kept)s)),
counts AS (DELETE FROM retrieval_termcount WHERE bucket_id IN (SELECT id FROM gone))
DELETE FROM retrieval_termbucket WHERE id IN (SELECT id FROM gone)
"""


def refresh_statistics(subject_id: int) -> bool:
    """Recompute the subject's term statistics from its live records in one transaction (a reader sees the old
    counts or the new ones). Only for a subject with a SubjectIndex row; returns whether it had one."""
    with transaction.atomic():
        lock([f"subject-statistics:{subject_id}"])  # two refreshes would insert the same buckets
        index = SubjectIndex.objects.filter(subject_id=subject_id).first()
        if index is None:
            return False
        rows = subject_rows(subject_id)
        delete_statistics(subject_id)
        with connection.cursor() as cursor:
            cursor.execute(_STATISTICS_SQL, {"subject": subject_id, "context_weight": CONTEXT_TERM_WEIGHT})
        SubjectIndex.objects.filter(pk=subject_id).update(rows=rows, statistics_at=timezone.now())
    return True


def recount_statistics(subject_id: int, lexemes: list[str]) -> bool:
    """Count ``lexemes`` again, and every bucket's totals, from the subject's live records, in one transaction: after
    records stopped being live, with the lexemes ``context.lexemes_around`` read from them before, the statistics of
    everything those records changed are what a full refresh would give, at the cost of the rows holding one of
    those lexemes instead of every lexeme of every row. Only for a subject with a SubjectIndex row; returns whether
    it had one. Its row count and time stay those of the last full refresh: what it does not count again (records
    written since) still drifts towards the next one."""
    with transaction.atomic():
        lock([f"subject-statistics:{subject_id}"])
        if not SubjectIndex.objects.filter(subject_id=subject_id).exists():
            return False
        params: dict[str, Any] = {"subject": subject_id, "context_weight": CONTEXT_TERM_WEIGHT, "lexemes": lexemes}
        with connection.cursor() as cursor:
            cursor.execute(_LEXEME_COUNTS_CLEARED_SQL, params)
            cursor.execute(_RECOUNT_SQL, params)
            cursor.execute(_EMPTIED_BUCKETS_SQL, {"subject": subject_id, "kept": [r[0] for r in cursor.fetchall()]})
    return True


def _drifted(index: SubjectIndex, rows: int) -> bool:
    return index.statistics_at is None or abs(rows - index.rows) > STATISTICS_DRIFT * max(index.rows, 1)


def maintain(subject_id: int) -> str:
    """Bring one subject's indexes and statistics to where its size says they should be; returns what it did.

    Idempotent: a second run finds nothing to do; a second worker finds the subject locked and leaves (the run
    holding the lock looks again at the end for what was queued meanwhile)."""
    name = f"subject-index:{subject_id}"
    if not try_session_lock(name):
        return "busy"
    started = _clock()
    try:
        return _maintain(subject_id)
    finally:
        session_unlock(name)
        _settle_marker(subject_id, started)


def _maintain(subject_id: int) -> str:
    rows = subject_rows(subject_id)
    index = SubjectIndex.objects.filter(subject_id=subject_id).first()
    subject = Subject.objects.filter(pk=subject_id).only("tenant_id").first()
    if subject is None or (index is None and rows < threshold()) or (index and rows < threshold() // 2):
        if index is None and not existing_indexes(subject_id):
            return "small"
        drop(subject_id)  # shrank, or indexes left behind by an erasure
        return "dropped"
    if index is None:
        index, displaced = _take_place(subject_id, subject.tenant_id, rows)
        if index is None:
            if existing_indexes(subject_id):
                drop(subject_id)  # left behind when the subject was displaced
            return "at_capacity"
        if displaced is not None:
            _drop_indexes(displaced)  # its row and statistics went with the reservation
    existing = existing_indexes(subject_id)
    missing = [i for i in PARTIAL_INDEXES if not existing.get(index_name(subject_id, i))]
    if missing and index.ready:
        SubjectIndex.objects.filter(pk=subject_id).update(ready=False)
    for partial_index in missing:
        _build(subject_id, partial_index, rows)
    _drop_obsolete(subject_id, existing)
    if missing:
        analyse_tables(subject_id, rows)
    if missing or _drifted(index, rows) or not index.ready:
        refresh_statistics(subject_id)
    SubjectIndex.objects.filter(pk=subject_id).update(ready=True)
    return "ready"


def _take_place(subject_id: int, tenant_id: int, rows: int) -> tuple[SubjectIndex | None, int | None]:
    """Reserve one of the ``capacity()`` places (and free the displaced subject's, whose retrieves go back to the
    exact scan at once), under one lock so that two workers cannot both take the last place."""
    with transaction.atomic():
        lock(["subject-index-places"])
        room, displaced = has_room(subject_id, rows)
        if not room:
            logger.warning("subject %s (%s records) is past the index threshold, but %s subjects already have their "
                           "own indexes (ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS): it is scored by the exact scan",
                           subject_id, rows, capacity())
            return None, None
        if displaced is not None:
            _forget(displaced)
        # Its size now, not 0 until its statistics are written: a subject being built is not the smallest one.
        return SubjectIndex.objects.create(subject_id=subject_id, tenant_id=tenant_id, rows=rows), displaced


def _clock() -> Any:
    # The database's clock, which also stamps the markers: the web and worker hosts' clocks may differ from it.
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _settle_marker(subject_id: int, started: Any) -> None:
    """After a run: the marker of what it answered goes; one queued while it ran (whose own task may have found the
    lock taken and left) is run again if the subject still needs it, else dropped."""
    PendingMaintenance.objects.filter(subject_id=subject_id, queued_at__lte=started).delete()
    if PendingMaintenance.objects.filter(subject_id=subject_id).exists():
        if needs_maintenance(subject_id):
            queue_maintenance(subject_id)
        else:
            PendingMaintenance.objects.filter(subject_id=subject_id).delete()


# Marked in the caller's transaction (the worker's derived write that made the subject due), so health never reads
# "nothing pending" between that commit and the marker.
_MARK_DUE_SQL = """
INSERT INTO retrieval_pendingmaintenance (subject_id, tenant_id, queued_at)
SELECT id, tenant_id, clock_timestamp() FROM memory_subject WHERE id = %s
ON CONFLICT (subject_id, tenant_id) DO UPDATE SET queued_at = EXCLUDED.queued_at
"""


def queue_maintenance(subject_id: int) -> None:
    """Mark the subject's maintenance pending (health's ``subject_indexes``) and queue it once this transaction
    commits."""
    with connection.cursor() as cursor:
        cursor.execute(_MARK_DUE_SQL, [subject_id])
    transaction.on_commit(partial(enqueue, "memory.retrieval.tasks.maintain_subject_index", subject_id,
                                  queue=BULK))


def pending_maintenance() -> int:
    """Subjects whose maintenance is queued or running, or whose indexes are not ready yet."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM (SELECT subject_id FROM retrieval_pendingmaintenance UNION "
                       "SELECT subject_id FROM retrieval_subjectindex WHERE NOT ready OR statistics_at IS NULL) s")
        return int(cursor.fetchone()[0])


def settling(subject_id: int, rows: int) -> bool:
    """Whether the subject is still being embedded (see SETTLING_ROWS); read from the index of unembedded rows."""
    return pending_records().filter(subject_id=subject_id).count() > min(SETTLING_SHARE * rows, SETTLING_ROWS)


def needs_maintenance(subject_id: int, *, wait_for_embeddings: bool = True) -> bool:
    rows = subject_rows(subject_id)
    if wait_for_embeddings and rows >= threshold() // 2 and settling(subject_id, rows):
        return False
    index = SubjectIndex.objects.filter(subject_id=subject_id).first()
    if index is None:
        return rows >= threshold() and has_room(subject_id, rows)[0]
    return rows < threshold() // 2 or not index.ready or _drifted(index, rows)


def after_writes_to(record_ids: Iterable[str]) -> None:
    """After the worker derived records' embeddings or windows: queue maintenance for their subjects that need it
    (one count per subject; nothing is queued for the many small ones)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT subject_id FROM memory_memoryrecord WHERE id = ANY(%s)", [list(record_ids)])
        subjects = sorted(row[0] for row in cursor.fetchall())
    for subject_id in subjects:
        if needs_maintenance(subject_id):
            queue_maintenance(subject_id)


def _warn_about_waiting(waiting: list[int], indexed: set[int]) -> None:
    """Once per sweep: how many subjects past the threshold have no indexes because every place is taken."""
    if waiting and len(indexed) >= capacity():
        logger.warning("%s subject(s) past the index threshold are scored by the exact scan: all %s places for "
                       "subject indexes are taken (ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS)", len(waiting), capacity())


def sweep(*, wait_for_embeddings: bool = True) -> list[int]:
    """The subjects whose indexes should be built, refreshed or dropped, including indexes left behind by erased
    subjects and ready subjects missing one of theirs: the schedule's safety net for writes no task followed (bulk
    loads, writes embedded in the request) and for indexes lost outside Engram."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT subject_id, count(*) FROM memory_memoryrecord GROUP BY subject_id "
                       "HAVING count(*) >= %s", [max(threshold() // 2, 1)])
        sizes = dict(cursor.fetchall())
    ready = dict(SubjectIndex.objects.values_list("subject_id", "ready"))
    indexed = set(ready)
    candidates = set(sizes) | indexed
    marked = set(PendingMaintenance.objects.values_list("subject_id", flat=True))
    built = _partial_indexes("\\d+")
    # Indexes of a subject without its SubjectIndex row: erased, shrunk, or displaced by a larger subject.
    orphaned = {_subject_of(name) for name in built} - indexed
    # A ready subject one of whose indexes is missing or invalid (dropped by hand, left out of a restore): its
    # retrieves are still exact, but the indexed statement reads every row of the subject where the index would have
    # read a few hundred (8 times slower at 100,000 records), and nothing else would rebuild it.
    incomplete = {s for s, is_ready in ready.items()
                  if is_ready and not all(built.get(index_name(s, i)) for i in PARTIAL_INDEXES)}
    due = sorted({s for s in candidates | marked if needs_maintenance(s, wait_for_embeddings=wait_for_embeddings)}
                 | incomplete)
    _warn_about_waiting([s for s in candidates - indexed - set(due) if sizes[s] >= threshold()], indexed)
    # A marker whose subject needs nothing (its task was lost, or the subject is still being embedded, whose last
    # embedding task marks it again) would keep health from ever reading zero.
    PendingMaintenance.objects.filter(subject_id__in=marked - set(due)).delete()
    return sorted(orphaned - set(due)) + due
