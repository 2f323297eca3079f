"""A large subject's own indexes and term statistics: built past the threshold and never below it, dropped when the
subject shrinks or is erased; the indexed path ranks like the exact scan, never under-fills, keeps every scope
predicate, and deletion leaves no word of a deleted record in the statistics.

The threshold is lowered for these tests, so a generated subject of about 1,150 records is "large": the vector
candidates are then a tenth of it for a retrieve of every namespace (100, as for any subject below 20,000
records) and a sixth for one narrowed to some namespaces (200), and the lexical leg reads only its rarer terms."""

from __future__ import annotations

import datetime as dt
import io
import itertools

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.deletion.services import memory_delete, subject_erase
from memory.embedder import get_embedder
from memory.identity.services import subject_get_or_create
from memory.models import MemoryRecord
from memory.records.services import RecordInput, memory_write_batch
from memory.records.tasks import embed_records
from memory.retrieval import candidates as legs
from memory.retrieval import subject_index
from memory.retrieval.context import refresh_context
from memory.retrieval.embedding import embed_record_ids, write_embeddings
from memory.retrieval.models import PendingMaintenance, SubjectIndex, TermBucket
from memory.scope import Scope
from tests.deletion.helpers import run_job, tables_containing

pytestmark = pytest.mark.django_db

SENTENCES = [
    "Plays the cello in a community orchestra", "Is allergic to peanuts and shellfish",
    "Runs a half marathon every spring", "Keeps bees in the back garden", "Learned Portuguese before moving abroad",
    "Prefers trains to planes for short trips", "Works night shifts at the hospital", "Collects vintage film cameras",
    "Has two cats named Miso and Tofu", "Volunteers at the food bank on Saturdays", "Drives an old electric van",
    "Reads science fiction before sleeping", "Goes climbing at the indoor wall", "Bakes sourdough bread on Sundays",
    "Is saving money for a sailing boat", "Teaches chess to children at the library",
    "Grew up on a farm near the coast", "Writes poetry in a small notebook", "Takes the ferry to work",
    "Repairs bicycles for neighbours", "Sings in a jazz choir", "Brews coffee with a hand grinder",
    "Studies astronomy with a backyard telescope", "Is training a rescue dog", "Paints watercolour landscapes",
    "Plays football with colleagues on Thursdays", "Avoids sugar after a diabetes diagnosis",
    "Meditates for twenty minutes each morning", "Restores antique furniture", "Knits scarves for the winter market",
    "Grows tomatoes on the balcony", "Speaks Japanese with her grandmother", "Swims in the lake before breakfast",
    "Builds model railways in the attic", "Follows the local basketball team", "Cooks spicy Thai curries",
    "Hikes mountain trails in the summer", "Photographs birds at the wetland", "Plays video games with her son",
    "Fixes old radios as a hobby", "Dances tango on Friday nights", "Runs a podcast about history",
    "Rides horses at a stable nearby", "Keeps a journal of dreams", "Designs board games",
    "Surfs when the waves are big", "Fosters kittens for the shelter", "Plans a trip to Patagonia",
]
TURNS = ["We talked about the orchestra concert", "She said the cello needs new strings",
         "Her cats knocked over the plant again", "The ferry was late this morning", "She baked bread for the fair",
         "The telescope showed Saturn's rings", "Her dog learned to sit", "She planned the Patagonia route"]
MARKER = "qzvstatword"
QUERIES = ["Who plays music in a group?", "Which pets does she have?", "What does she grow at home?",
           "sports on weekday evenings", "cello orchestra", "Does she have a food allergy?",
           "How does she get to work?", "old machines she repairs", "Patagonia trip plans", "bread baking"]


def _scope(tenant, external_id, namespaces=None):
    subject = subject_get_or_create(tenant=tenant, external_id=external_id)
    return Scope(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=external_id,
                 permissions=frozenset({"read", "write"}), namespaces=namespaces, actor="test")


def _prepare_index_builds():
    # A test runs in one transaction, where CREATE INDEX refuses a table with pending deferred-constraint checks.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _restore_deferred_constraints():
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


@pytest.fixture
def large(settings, tenant):
    """One subject of 1,128 facts (every pair of SENTENCES: distinct texts, embeddings the normalised sum of the two
    sentences' real embeddings, so no two rows share a vector), a third of them in "project", plus a few
    conversation turns with their context windows, written through the batch service; its indexes built with the
    threshold at 1,000."""
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 1000
    scope = _scope(tenant, "usr_large")
    base = dict(zip(SENTENCES, np.asarray(get_embedder().embed(SENTENCES)), strict=True))
    pairs = list(itertools.combinations(SENTENCES, 2))
    items = [RecordInput(namespace="project" if n % 3 == 0 else "user/profile", kind="note", field=f"fact_{n}",
                         value=f"{a}; {b}", text=f"{a}. {b}.", event_id=f"evt_large_{n}")
             for n, (a, b) in enumerate(pairs)]
    started = dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC)
    items += [RecordInput(namespace="user/conversation", kind="conversation_turn", field=f"turn_{n}", value=text,
                          text=text, event_id=f"evt_turn_{n}", memory_type="episodic",
                          occurred_at=started + dt.timedelta(minutes=n)) for n, text in enumerate(TURNS)]
    for start in range(0, len(items), 500):
        memory_write_batch(scope=scope, items=items[start:start + 500])
    ids = dict(legs.eligible(scope, legs.Filters(namespaces=None)).values_list("field", "pk"))
    vectors = []
    for n, (a, b) in enumerate(pairs):
        v = base[a] + base[b]
        vectors.append((ids[f"fact_{n}"], (v / np.linalg.norm(v)).tolist()))
    vectors += list(zip([ids[f"turn_{n}"] for n in range(len(TURNS))], get_embedder().embed(TURNS), strict=True))
    write_embeddings(vectors)
    refresh_context([ids[f"turn_{n}"] for n in range(len(TURNS))])
    _prepare_index_builds()
    assert subject_index.maintain(scope.subject_id) == "ready"
    _restore_deferred_constraints()
    legs.forget_indexed_subjects()
    return scope


def _write_facts(scope, count, label, tag):
    """``count`` plain facts through the write gate; their embedding tasks are left unrun."""
    memory_write_batch(scope=scope, items=[RecordInput(namespace="user/profile", kind="note", field=f"f{n}",
                                                       value=str(n), text=f"{label} fact {n}", event_id=f"evt_{tag}{n}")
                                           for n in range(count)])


def _search(scope, query, *, exact=False, filters=None, k=10):
    return legs.search(scope, filters or legs.Filters(namespaces=None), query, get_embedder().embed_query(query),
                       pool=max(4 * k, 40), limit=k, max_distance=0.75, exact=exact)


def _ranking(result):
    return [(c.row["id"], round(c.relevance, 9), c.lexical_rank, c.semantic_rank) for c in result.candidates]


def test_a_subject_past_the_threshold_gets_its_own_indexes_and_loses_them_when_it_shrinks(large, settings):
    assert set(subject_index.existing_indexes(large.subject_id)) == {
        subject_index.index_name(large.subject_id, i) for i in subject_index.PARTIAL_INDEXES}
    assert SubjectIndex.objects.get(subject_id=large.subject_id).ready
    assert subject_index.sweep() == []  # nothing left to do

    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 5000  # now the subject is less than half of it
    assert subject_index.sweep() == [large.subject_id]
    assert subject_index.maintain(large.subject_id) == "dropped"
    assert not subject_index.existing_indexes(large.subject_id)
    assert not SubjectIndex.objects.exists() and not TermBucket.objects.exists()


def test_a_ready_subject_that_lost_an_index_is_due_again_and_index_subjects_rebuilds_it(large):
    graph = subject_index.index_name(large.subject_id, subject_index.PARTIAL_INDEXES[0])
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {graph}")
    assert subject_index.sweep() == [large.subject_id]

    _prepare_index_builds()
    out = io.StringIO()
    call_command("index_subjects", stdout=out)

    assert f"subject {large.subject_id} (" in out.getvalue() and "): ready" in out.getvalue()
    assert subject_index.existing_indexes(large.subject_id).get(graph) is True
    assert subject_index.sweep() == []
    query = QUERIES[0]
    assert _ranking(_search(large, query)) == _ranking(_search(large, query, exact=True))


def test_a_subject_indexed_with_a_graph_per_table_gets_the_blended_graph_and_loses_the_old_ones(large):
    # As an earlier version left it: a graph of the records' own vectors and one of their windows', no blended one.
    s = large.subject_id
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {subject_index.index_name(s, subject_index.PARTIAL_INDEXES[0])}")
        cursor.execute(f"CREATE INDEX retrieval_subject_{s}_rv ON memory_memoryrecord "
                       f"USING hnsw (embedding vector_cosine_ops) WHERE subject_id = {s}")
        cursor.execute(f"CREATE INDEX retrieval_subject_{s}_cv ON retrieval_recordcontext "
                       f"USING hnsw (embedding vector_cosine_ops) WHERE subject_id = {s}")
    assert subject_index.sweep() == [s]

    _prepare_index_builds()
    call_command("index_subjects", stdout=io.StringIO())

    assert set(subject_index.existing_indexes(s)) == {subject_index.index_name(s, i)
                                                      for i in subject_index.PARTIAL_INDEXES}
    assert subject_index.sweep() == []
    for query in QUERIES[:4]:
        assert _ranking(_search(large, query)) == _ranking(_search(large, query, exact=True))


def test_the_planner_knows_the_subjects_size_once_its_indexes_are_built(large):
    # Statistics from before the subject grew made the indexed statement read every row of the subject once per
    # candidate. Built indexes come with statistics that count the subject's rows.
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) SELECT id FROM memory_memoryrecord WHERE subject_id = %s",
                       [large.subject_id])
        estimate = cursor.fetchone()[0][0]["Plan"]["Plan Rows"]

    assert estimate >= MemoryRecord.objects.filter(subject_id=large.subject_id).count() / 2


def _analyses() -> dict[str, int]:
    """How many times each table the indexed statement reads was analysed (counted at once, even inside a test's
    transaction)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT relname, analyze_count FROM pg_stat_user_tables "
                       "WHERE relname IN ('memory_memoryrecord', 'retrieval_recordcontext')")
        return dict(cursor.fetchall())


def _embedded_subject(tenant, external_id, count):
    scope = _scope(tenant, external_id)
    _write_facts(scope, count, external_id, external_id)
    embed_record_ids(list(MemoryRecord.objects.filter(subject_id=scope.subject_id).values_list("pk", flat=True)))
    return scope


def test_building_a_small_share_of_a_known_table_skips_analysing_it_and_a_large_share_does_not(large, settings,
                                                                                               tenant):
    # ANALYZE samples some 30,000 rows whatever the table's size: in a shared table of many subjects it costs as
    # much as building a small subject's indexes, and a subject that is a small share of the table changes nothing
    # the planner knows. 40 records are 3% of the 1,136 the large subject's build counted; 300 are 26%.
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    small, share = _embedded_subject(tenant, "usr_small_share", 40), _embedded_subject(tenant, "usr_large_share", 300)
    _prepare_index_builds()
    before = _analyses()

    assert subject_index.maintain(small.subject_id) == "ready"
    assert _analyses() == before
    legs.forget_indexed_subjects()
    found = _search(small, "usr_small_share fact 7")
    assert found.indexed and _ranking(found) == _ranking(_search(small, "usr_small_share fact 7", exact=True))

    assert subject_index.maintain(share.subject_id) == "ready"
    assert _analyses()["memory_memoryrecord"] == before["memory_memoryrecord"] + 1


def test_a_build_gets_memory_for_its_graph_and_no_more_within_the_operators_ceiling(settings):
    # Twice the ~2.2 kB pgvector's graph takes per row; 64 MB at least (PostgreSQL's default), the setting at most.
    settings.ENGRAM_SUBJECT_INDEX_BUILD_MEMORY = "1GB"
    assert subject_index.build_memory_kb(1_000) == 64 * 1024
    assert subject_index.build_memory_kb(100_000) == 400_000
    assert subject_index.build_memory_kb(1_000_000) == 1024 * 1024
    settings.ENGRAM_SUBJECT_INDEX_BUILD_MEMORY = "256MB"
    assert subject_index.build_memory_kb(100_000) == 256 * 1024


def test_no_indexes_are_built_below_the_threshold(settings, tenant):
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    scope = _scope(tenant, "usr_small")
    _write_facts(scope, 29, "Small", "s")
    _prepare_index_builds()

    assert subject_index.sweep() == []
    assert subject_index.maintain(scope.subject_id) == "small"
    assert not subject_index.existing_indexes(scope.subject_id) and not SubjectIndex.objects.exists()
    assert not _search(scope, "small fact").indexed


def test_the_indexed_path_returns_the_exact_scans_ids_in_the_same_order(large):
    for query in QUERIES:
        indexed, exact = _search(large, query), _search(large, query, exact=True)
        assert indexed.indexed and not exact.indexed
        assert _ranking(indexed) == _ranking(exact), query  # ids, relevance and both legs' ranks
        assert indexed.excluded == exact.excluded


def test_the_indexed_path_explains_unservable_records_and_counts_unembedded_ones_as_the_exact_scan_does(large):
    records = MemoryRecord.objects.filter(subject_id=large.subject_id, memory_type="semantic")
    cello = list(records.filter(text__contains="cello").order_by("pk").values_list("pk", flat=True))
    MemoryRecord.objects.filter(pk=cello[0]).update(status="superseded")
    MemoryRecord.objects.filter(pk=cello[1]).update(valid_until=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    bees = list(records.filter(text__contains="bees").values_list("pk", flat=True)[:3])
    MemoryRecord.objects.filter(pk__in=bees).update(embedding=None)
    for query in ("Plays the cello in a community orchestra", "cello orchestra"):
        indexed, exact = _search(large, query), _search(large, query, exact=True)
        assert indexed.indexed and not exact.indexed
        reasons = {row["id"]: row["reason"] for row in indexed.excluded}
        assert reasons == {row["id"]: row["reason"] for row in exact.excluded}
        assert reasons[cello[0]] == "superseded" and reasons[cello[1]] == "expired"
        assert indexed.pending == exact.pending == 3


@pytest.mark.parametrize("filters", [legs.Filters(namespaces=["user/conversation"]),
                                     legs.Filters(namespaces=None, kinds=["conversation_turn"]),
                                     legs.Filters(namespaces=["user/profile"], fields=["fact_5", "fact_7"])])
def test_it_never_under_fills_when_the_predicates_remove_most_index_candidates(large, filters):
    eligible = legs.eligible(large, filters).count()
    for k in (1, 10, 25):
        found = _search(large, "music and sports", filters=filters, k=k)
        by_meaning = [c for c in found.candidates if c.semantic_rank is not None and c.semantic_rank <= k]
        assert len(by_meaning) == min(k, eligible)
        assert _ranking(found) == _ranking(_search(large, "music and sports", filters=filters, k=k, exact=True))


def test_the_indexed_path_keeps_every_scope_predicate(large, other_tenant, tenant):
    # Another subject of the same tenant and one of another tenant hold the same texts and vectors.
    twin = _scope(tenant, "usr_twin")
    foreign = _scope(other_tenant, "usr_large")
    sample = list(legs.eligible(large, legs.Filters(namespaces=None)).values("text", "embedding")[:60])
    for other in (twin, foreign):
        written = memory_write_batch(scope=other, items=[RecordInput(
            namespace="user/profile", kind="note", field=f"copy_{n}", value=str(n), text=row["text"],
            event_id=f"evt_copy_{n}") for n, row in enumerate(sample)])
        write_embeddings([(w.written.record.pk, list(row["embedding"])) for w, row in zip(written, sample,
                                                                                            strict=True)])
    own = set(legs.eligible(large, legs.Filters(namespaces=None)).values_list("pk", flat=True))
    granted = _scope(tenant, "usr_large", namespaces=("project",))
    project = set(legs.eligible(granted, legs.Filters(namespaces=None)).values_list("pk", flat=True))
    for query in QUERIES[:5]:
        found = _search(large, query)
        assert found.indexed and {c.row["id"] for c in found.candidates} <= own
        narrowed = _search(granted, query)  # the namespace grant: only "project" records, and still a full pool
        assert narrowed.indexed and {c.row["id"] for c in narrowed.candidates} <= project
        exact = _search(granted, query, exact=True)
        # The answer (the first `limit`) is the scan's. The grant removes two thirds of the graphs' candidates, so
        # the pool's last places (relevance near nothing) may hold records the approximate graphs did not reach.
        assert len(narrowed.candidates) >= 40
        assert _ranking(narrowed)[:10] == _ranking(exact)[:10]


def test_the_class_readers_still_filter_on_the_indexed_path(large):
    as_user = Scope(tenant_id=large.tenant_id, subject_id=large.subject_id, subject_external_id="usr_large",
                    permissions=frozenset({"read"}), namespaces=None, actor="user:1", reader_role="nobody")
    assert not legs.eligible(as_user, legs.Filters(namespaces=None)).exists()
    found = _search(as_user, "cello orchestra")
    assert found.candidates == [] and not found.indexed  # fell back to the exact scan, which has nothing either


def test_deleting_a_record_of_an_indexed_subject_leaves_its_words_in_no_statistics(large):
    written = memory_write_batch(scope=large, items=[RecordInput(
        namespace="user/profile", kind="note", field="secret", value=MARKER, text=f"Her locker code word is {MARKER}",
        event_id="evt_marker")])
    subject_index.refresh_statistics(large.subject_id)
    assert "retrieval_termcount.lexeme" in tables_containing(MARKER)

    job = memory_delete(scope=large, memory_id=written[0].written.record.pk)

    assert run_job(job.pk) == "completed"  # its read checks include the statistics
    assert tables_containing(MARKER) == []
    assert TermBucket.objects.filter(subject_id=large.subject_id).exists()  # the others' counts stay
    assert _ranking(_search(large, "locker code")) == _ranking(_search(large, "locker code", exact=True))


def test_erasing_an_indexed_subject_drops_its_statistics_and_then_its_indexes(large, sync_tasks,
                                                                             django_capture_on_commit_callbacks):
    job = subject_erase(scope=large)
    with django_capture_on_commit_callbacks() as on_commit:
        assert run_job(job.pk) == "completed"  # its read checks include the statistics

    assert not SubjectIndex.objects.exists() and not TermBucket.objects.exists()
    _prepare_index_builds()
    for callback in on_commit:  # the maintenance task the erasure queued drops the partial indexes
        callback()
    assert not subject_index.existing_indexes(large.subject_id)


def test_a_retrieve_of_an_indexed_subject_is_one_statement_once_the_process_knows_it(large):
    with CaptureQueriesContext(connection) as first:
        _search(large, "cello orchestra")
    with CaptureQueriesContext(connection) as then:
        _search(large, "cello orchestra")

    assert len(first) == 2  # the scan variant finds the subject indexed and hands over
    assert len(then) == 1


def test_the_worker_indexes_a_subject_that_grows_past_the_threshold_and_refreshes_its_statistics(
        settings, tenant, sync_tasks, django_capture_on_commit_callbacks):
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 40
    scope = _scope(tenant, "usr_growing")
    _prepare_index_builds()

    def write(prefix, count):
        with django_capture_on_commit_callbacks(execute=True):  # the embedding task, then what it queues
            memory_write_batch(scope=scope, items=[RecordInput(
                namespace="user/profile", kind="note", field=f"{prefix}_{n}", value=str(n),
                text=f"{SENTENCES[n % len(SENTENCES)]} ({prefix} {n})", event_id=f"evt_{prefix}_{n}")
                for n in range(count)])

    write("first", 39)
    assert not SubjectIndex.objects.exists()  # below the threshold: nothing built
    write("second", 2)
    index = SubjectIndex.objects.get(subject_id=scope.subject_id)
    assert index.ready and index.rows == 41
    assert len(subject_index.existing_indexes(scope.subject_id)) == len(subject_index.PARTIAL_INDEXES)

    write("third", 5)  # more than 1% more rows: the statistics are recomputed after the embedding task
    assert SubjectIndex.objects.get(subject_id=scope.subject_id).rows == 46
    _restore_deferred_constraints()
    for query in QUERIES[:3]:
        indexed, exact = _search(scope, query, k=5), _search(scope, query, k=5, exact=True)
        assert indexed.indexed and _ranking(indexed) == _ranking(exact)


def test_index_subjects_builds_what_is_due_at_once_and_a_second_run_finds_nothing(settings, tenant):
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    scope = _scope(tenant, "usr_imported")
    _write_facts(scope, 30, "Imported", "i")
    _prepare_index_builds()
    first, second = io.StringIO(), io.StringIO()

    call_command("index_subjects", stdout=first)
    call_command("index_subjects", stdout=second)

    assert f"subject {scope.subject_id} (30 records): ready" in first.getvalue()
    assert second.getvalue().startswith("0 subject(s) to maintain")
    assert SubjectIndex.objects.get(subject_id=scope.subject_id).ready


def test_the_worker_waits_until_an_import_is_embedded_before_it_indexes_the_subject(settings, tenant):
    """An HNSW index built in the middle of an import would take every later embedding as a slow insert."""
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    scope = _scope(tenant, "usr_importing")
    _write_facts(scope, 40, "Imported", "w")

    assert subject_index.sweep() == []  # every record still waits for its embedding
    assert subject_index.sweep(wait_for_embeddings=False) == [scope.subject_id]  # what index_subjects runs

    embed_record_ids(list(MemoryRecord.objects.filter(subject_id=scope.subject_id).values_list("pk", flat=True)))
    assert subject_index.sweep() == [scope.subject_id]


def test_a_large_import_is_indexed_after_its_last_batch_is_embedded_not_once_most_of_it_is(settings, tenant):
    """5% of a 100,000-turn import is eight of its tasks: indexes built then took those records as slow inserts."""
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    scope = _scope(tenant, "usr_large_import")
    waiting = subject_index.SETTLING_ROWS + 1
    count = 21 * waiting  # the waiting rows are under 5% of the subject
    _write_facts(scope, count, "Imported", "l")
    ids = list(MemoryRecord.objects.filter(subject_id=scope.subject_id).order_by("pk").values_list("pk", flat=True))

    embed_records(ids[:count - waiting])  # the worker's task for all but the last rows
    assert not PendingMaintenance.objects.filter(subject_id=scope.subject_id).exists()
    assert subject_index.sweep() == []

    embed_records(ids[count - waiting:count - waiting + 1])
    assert PendingMaintenance.objects.filter(subject_id=scope.subject_id).exists()  # health counts it as pending
    assert subject_index.sweep() == [scope.subject_id]


def test_past_the_cap_a_subject_is_scanned_exactly_until_it_holds_twice_the_smallest_indexed_subjects_rows(
        settings, tenant, caplog):
    """Every subject's partial indexes weigh on the planning of every statement on the shared tables, so only
    ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS subjects have them; a much larger subject takes the smallest one's place."""
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    settings.ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS = 1
    first, second = _scope(tenant, "usr_first"), _scope(tenant, "usr_second")
    _write_facts(first, 30, "First", "a")
    _write_facts(second, 50, "Second", "b")
    embed_record_ids(list(MemoryRecord.objects.values_list("pk", flat=True)))
    _prepare_index_builds()
    assert subject_index.maintain(first.subject_id) == "ready"

    with caplog.at_level("WARNING", logger="memory.retrieval.subject_index"):
        assert subject_index.sweep() == []  # 50 records: less than twice the 30 of the subject indexed
    assert "1 subject(s) past the index threshold are scored by the exact scan" in caplog.text
    assert subject_index.maintain(second.subject_id) == "at_capacity"
    assert not subject_index.existing_indexes(second.subject_id)
    assert not _search(second, "Second fact", k=5).indexed

    _write_facts(second, 10, "Second more", "c")  # 60 records: twice the smallest indexed subject
    embed_record_ids(list(MemoryRecord.objects.filter(subject_id=second.subject_id).values_list("pk", flat=True)))
    assert subject_index.sweep() == [second.subject_id]
    assert subject_index.maintain(second.subject_id) == "ready"

    assert list(SubjectIndex.objects.values_list("subject_id", flat=True)) == [second.subject_id]
    assert not subject_index.existing_indexes(first.subject_id)
    assert not TermBucket.objects.filter(subject_id=first.subject_id).exists()
    _restore_deferred_constraints()
    assert _search(second, "Second fact", k=5).indexed
    displaced = _search(first, "First fact", k=5)
    assert not displaced.indexed and len(displaced.candidates) >= 5  # the exact scan still answers
    assert subject_index.sweep() == []  # 30 records can never take back the place of 60


def _statistics(subject_id):
    with connection.cursor() as cursor:
        cursor.execute("SELECT namespace, memory_class_id, records, length FROM retrieval_termbucket "
                       "WHERE subject_id = %s", [subject_id])
        buckets = {(ns, cls): (n, round(length, 6)) for ns, cls, n, length in cursor.fetchall()}
        cursor.execute("SELECT b.namespace, b.memory_class_id, tc.lexeme, tc.records FROM retrieval_termcount tc "
                       "JOIN retrieval_termbucket b ON b.id = tc.bucket_id WHERE b.subject_id = %s", [subject_id])
        counts = {(ns, cls, lexeme): n for ns, cls, lexeme, n in cursor.fetchall()}
    return buckets, counts


def _row_version(subject_id, lexeme):
    with connection.cursor() as cursor:
        cursor.execute("SELECT tc.xmin::text FROM retrieval_termcount tc JOIN retrieval_termbucket b "
                       "ON b.id = tc.bucket_id WHERE b.subject_id = %s AND tc.lexeme = %s", [subject_id, lexeme])
        return sorted(row[0] for row in cursor.fetchall())


def test_a_deletion_counts_again_only_the_words_it_changed_and_leaves_what_a_full_refresh_would(large):
    # A conversation of turns 20 minutes apart: deleting the middle one leaves a 40-minute gap, which starts a new
    # session, so the windows on both sides lose turns as well as the deleted one. Its text is too short to be a
    # marker, and its word is said nowhere else.
    started = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
    texts = ["Booked the dentist for Tuesday", "The plumber fixed the boiler", "zq7",
             "Bought a kayak paddle online", "Cancelled the gym membership"]
    written = memory_write_batch(scope=large, items=[
        RecordInput(namespace="user/diary", kind="conversation_turn", field=f"diary_{n}", value=text, text=text,
                    event_id=f"evt_diary_{n}", memory_type="episodic",
                    occurred_at=started + dt.timedelta(minutes=20 * n))
        for n, text in enumerate(texts)])
    ids = [w.written.record.pk for w in written]
    refresh_context(ids)
    subject_index.refresh_statistics(large.subject_id)
    buckets, counts = _statistics(large.subject_id)
    assert any(key[2] == "zq7" for key in counts) and any(key[2] == "kayak" for key in counts)
    untouched = _row_version(large.subject_id, "cello")

    assert run_job(memory_delete(scope=large, memory_id=ids[2]).pk) == "completed"

    recounted = _statistics(large.subject_id)
    assert not any(key[2] == "zq7" for key in recounted[1])
    assert recounted != (buckets, counts)  # the deleted turn, and what the windows around it held, moved
    assert _row_version(large.subject_id, "cello") == untouched  # no word it did not change was counted again
    subject_index.refresh_statistics(large.subject_id)
    assert recounted == _statistics(large.subject_id)
