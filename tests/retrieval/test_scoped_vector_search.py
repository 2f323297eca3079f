"""The memory candidates under selective scopes: whenever k eligible rows exist, each leg ranks k of them and only
them; the scope is in the SQL both legs read; the query count is pinned."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.embedder import get_embedder
from memory.identity.services import subject_get_or_create
from memory.records.services import RecordInput, memory_write_batch
from memory.retrieval import candidates as legs
from memory.scope import Scope
from tests.retrieval.conftest import RETRIEVE

pytestmark = pytest.mark.django_db

TOPICS = ["seat", "meal", "hotel", "airline", "city", "language", "budget", "car", "lounge", "luggage", "visa",
          "currency"]


def _scope(tenant, external_id):
    subject = subject_get_or_create(tenant=tenant, external_id=external_id)
    return Scope(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=external_id,
                 permissions=frozenset({"read", "write"}), namespaces=None, actor="test")


def _item(i, j, *, version=""):
    namespace, kind = ("user/profile", "preference") if j % 2 == 0 else ("project", "config")
    return RecordInput(namespace=namespace, kind=kind, field=f"{TOPICS[j]}_{i}", value=f"v{j}{version}",
                       text=f"Subject {i} has a {TOPICS[j]} preference number {j}{version}",
                       event_id=f"evt_{i}_{j}{version}")


@pytest.fixture
def crowd(tenant, sync_tasks, django_capture_on_commit_callbacks):
    """26 subjects in one tenant (a selective scope); subject i owns i % 13 live records, all embedded, even j
    in user/profile and odd j in project; each also holds one superseded record, which is never eligible."""
    scopes = {}
    for i in range(26):
        scope = _scope(tenant, f"usr_{i}")
        items = [_item(i, j) for j in range(i % 13)]
        if items:
            with django_capture_on_commit_callbacks(execute=True):
                memory_write_batch(scope=scope, items=items)
                memory_write_batch(scope=scope, items=[_item(i, 0, version=" (updated)")])  # supersedes j=0
        scopes[i] = (scope, i % 13)
    return scopes


FILTERS = [  # (filters, how many of a subject's n live records they leave eligible)
    (legs.Filters(namespaces=None), lambda n: n),
    (legs.Filters(namespaces=["project"]), lambda n: n // 2),
    (legs.Filters(namespaces=None, kinds=["preference"]), lambda n: (n + 1) // 2),
    (legs.Filters(namespaces=["user"], types=["semantic"]), lambda n: (n + 1) // 2),
]


def _search(scope, filters, query, k):
    return legs.search(scope, filters, query, get_embedder().embed_query(query), pool=k, limit=k, max_distance=0.75)


@pytest.mark.parametrize(("filters", "eligible"), FILTERS)
def test_it_returns_k_rows_whenever_k_eligible_rows_exist(crowd, filters, eligible):
    for scope, owned in crowd.values():
        own_ids = set(legs.eligible(scope, filters).values_list("pk", flat=True))
        assert len(own_ids) == eligible(owned)
        for k in (1, 5, 10, 12):
            found = _search(scope, filters, "travel seat preference", k)
            by_meaning = [c for c in found.candidates if c.semantic_rank is not None and c.semantic_rank <= k]
            by_words = [c for c in found.candidates if c.lexical_rank is not None and c.lexical_rank <= k]
            assert len(by_meaning) == min(k, eligible(owned))  # every eligible row has an embedding
            assert len(by_words) == min(k, eligible(owned))  # "preference" is in every text
            assert {c.row["id"] for c in found.candidates} <= own_ids
            assert all(c.row["status"] == "active" for c in found.candidates)


def test_both_legs_read_one_cte_that_carries_every_scope_and_validity_predicate_in_sql(agent, remember):
    remember(agent, "Prefers aisle seats", namespace=["user", "travel_preferences"], field="seat", value="aisle")
    from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve

    scope = _scope(agent.tenant, "usr_owner")
    with CaptureQueriesContext(connection) as captured:
        memory_retrieve(scope=scope, request=RetrieveRequest(query="aisle seats", namespaces=["user"],
                                                             kinds=["preference"]))

    statements = [q["sql"] for q in captured if "by_semantic AS (" in q["sql"]]
    assert len(statements) == 1  # both legs, fusion and the explanations: one statement
    sql = statements[0]
    eligible = sql.split(" AS NOT MATERIALIZED (", 1)[1].split("),\ne AS MATERIALIZED", 1)[0]
    where = eligible.split(" WHERE ", 1)[1]
    assert f'"memory_memoryrecord"."tenant_id" = {agent.tenant.pk}' in where
    assert f'"memory_memoryrecord"."subject_id" = {scope.subject_id}' in where
    assert '"memory_memoryrecord"."status" = \'active\'' in where
    assert '"memory_memoryrecord"."valid_until" > (STATEMENT_TIMESTAMP())' in where
    assert '"memory_memoryclass"."allowed_readers" @> \'["agent"]\'' in where  # the class's reader policy
    assert '"memory_memoryrecord"."confidence" = \'confirmed\'' in where
    assert "LIKE 'user/%'" in where and "\"kind\" IN ('preference')" in where  # the task filters
    # Each leg scores rows of the scoped CTE and of nothing else: no other read of the records table.
    rest = sql.split("),\ne AS MATERIALIZED", 1)[1].split("\nx (", 1)[0]
    assert "memory_memoryrecord" not in rest
    assert "eligible.search_vector @@ q.tsq" in rest and "FROM e, q, unnest" in rest  # the lexical leg
    assert "(eligible.embedding <=> q.raw)" in rest and "AS own_distance" in rest  # the vector leg
    # A windowed turn's window is scored from the turn's own row: its blended vector and its window's lexemes.
    assert "eligible.blended_embedding <#> q.v" in rest and "eligible.context_terms @@ q.tsq" in rest
    assert "FROM eligible, q" in rest
    assert "own_distance, ctx_distance FROM e" in rest  # fused from those rows alone


def test_the_vector_leg_is_an_exact_scan_even_with_an_hnsw_index_present(crowd):
    scope, _ = crowd[12]
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # deferred FK checks block CREATE INDEX
        cursor.execute("CREATE INDEX tmp_hnsw ON memory_memoryrecord USING hnsw (embedding vector_cosine_ops)")
        cursor.execute("SET LOCAL enable_seqscan = off")
    found = _search(scope, legs.Filters(namespaces=None), "seat preference", 10)

    assert len([c for c in found.candidates if c.semantic_rank is not None and c.semantic_rank <= 10]) == 10


def test_it_pins_the_number_of_queries_per_retrieve(agent, remember, django_assert_num_queries):
    for n in range(8):
        remember(agent, f"Preference number {n} about seats", field=f"pref_{n}", value=str(n))

    # auth: the key and the principal's subject (1); rate limit (1); memory candidates, both legs, explanations
    # and pending count (1); log insert (1).
    with django_assert_num_queries(4):
        response = agent.post(RETRIEVE, {"query": "seat preferences", "limit": 5})
    assert response.status_code == 200
    assert len(response.json()["packets"]) == 5


def test_the_statement_is_planned_once_per_connection_and_its_generic_plan_keeps_every_subject_to_itself(crowd):
    """The statement is prepared on the connection and runs on its generic plan (planned without knowing the
    subject) from the first execution; each subject gets the same ranking every time, and only its own records."""
    filters = legs.Filters(namespaces=None)
    subjects = [crowd[i] for i in (12, 11, 10, 9, 25, 24)]

    def ranking(scope):
        return [c.row["id"] for c in _search(scope, filters, "travel seat preference", 10).candidates]

    first = {scope.subject_id: ranking(scope) for scope, _ in subjects}
    later = {}
    for _ in range(3):
        later = {scope.subject_id: ranking(scope) for scope, _ in subjects}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
                       "WHERE statement LIKE '%%by_semantic AS (%%'")
        prepared, generic, custom = cursor.fetchone()

    assert prepared == 1  # one text for every subject: one prepared statement
    assert generic == 4 * len(subjects) and custom == 0  # never planned per retrieve, from the first
    assert later == first
    for scope, owned in subjects:
        own_ids = set(legs.eligible(scope, filters).values_list("pk", flat=True))
        assert len(first[scope.subject_id]) >= min(10, owned) and set(first[scope.subject_id]) <= own_ids
