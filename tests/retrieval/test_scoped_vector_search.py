"""The vector leg under selective scopes: whenever k eligible rows exist, k come back; query count pinned."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.embedder import get_embedder
from memory.retrieval import candidates as legs
from memory.scope import Scope
from memory.services.batch import memory_write_batch
from memory.services.identity import subject_get_or_create
from memory.services.writes import RecordInput
from tests.retrieval.conftest import RETRIEVE

pytestmark = pytest.mark.django_db

TOPICS = ["seat", "meal", "hotel", "airline", "city", "language", "budget", "car", "lounge", "luggage", "visa",
          "currency"]


def _scope(tenant, external_id):
    subject = subject_get_or_create(tenant=tenant, external_id=external_id)
    return Scope(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=external_id,
                 permissions=frozenset({"read", "write"}), namespaces=None, actor="test")


@pytest.fixture
def crowd(tenant, sync_tasks, django_capture_on_commit_callbacks):
    """26 subjects; subject i owns i % 13 records, all embedded, in one tenant (a selective scope)."""
    scopes = {}
    for i in range(26):
        scope = _scope(tenant, f"usr_{i}")
        items = [RecordInput(namespace="user/profile", kind="preference", field=f"{TOPICS[j]}_{i}",
                             value=f"v{j}", text=f"Subject {i} has a {TOPICS[j]} preference number {j}",
                             event_id=f"evt_{i}_{j}") for j in range(i % 13)]
        if items:
            with django_capture_on_commit_callbacks(execute=True):
                memory_write_batch(scope=scope, items=items)
        scopes[i] = (scope, i % 13)
    return scopes


def test_it_returns_k_rows_whenever_k_eligible_rows_exist(crowd):
    vector = get_embedder().embed_query("travel preferences")
    for scope, owned in crowd.values():
        for k in (1, 5, 10, 12):
            rows = legs.semantic(scope, legs.Filters(namespaces=None), vector, k)
            assert len(rows) == min(k, owned)
            assert {r.subject_id for r in rows} <= {scope.subject_id}


def test_the_vector_leg_is_an_exact_scan_even_with_an_hnsw_index_present(crowd):
    scope, _ = crowd[12]
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # deferred FK checks block CREATE INDEX
        cursor.execute("CREATE INDEX tmp_hnsw ON memory_memoryrecord USING hnsw (embedding vector_cosine_ops)")
        cursor.execute("SET LOCAL enable_seqscan = off")
    vector = get_embedder().embed_query("seat preference")

    rows = legs.semantic(scope, legs.Filters(namespaces=None), vector, 10)

    assert len(rows) == 10


def test_it_pins_the_number_of_queries_per_retrieve(agent, remember, django_assert_num_queries):
    for n in range(8):
        remember(agent, f"Preference number {n} about seats", field=f"pref_{n}", value=str(n))

    # auth: key + subject (2); legs: lexical, vector, excluded, pending count (4); log insert (1).
    with django_assert_num_queries(7):
        response = agent.post(RETRIEVE, {"query": "seat preferences", "limit": 5})
    assert response.status_code == 200
    assert len(response.json()["packets"]) == 5
