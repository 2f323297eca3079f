"""GET /api/v1/health's caught-up signal: ``derived_pending`` counts every kind of derived work still to do and
reaches 0 only when retrieval sees everything written."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memory.models import MemoryRecord
from memory.retrieval import subject_index
from memory.retrieval.embedding import embed_record_ids
from memory.retrieval.models import PendingContext, RecordContext
from memory.retrieval.tasks import sweep_subject_indexes
from tests.conftest import wait_for

KINDS = {"embeddings", "context_windows", "subject_indexes", "summaries", "knowledge_chunks"}
TURNS = [
    "Lea: Do you still go swimming at the lake before work?",
    "Sam: Yes, every Sunday morning, even when the water is cold!",
    "Lea: Brave. I only managed to fix my bike this week.",
    "Sam: My cousin helped me repaint the kitchen in yellow.",
]


def _health() -> dict:
    return APIClient().get("/api/v1/health").json()


def _turns() -> list[dict]:
    return [{"namespace": ["user", "conversation"], "kind": "conversation_turn", "type": "episodic",
             "fact": {"field": f"turn_{n}", "value": text}, "text": text,
             "source": {"type": "explicit_user_statement", "event_id": f"evt_health_{n}",
                        "occurred_at": "2026-05-02T18:00:00Z"}} for n, text in enumerate(TURNS)]


@pytest.mark.django_db
def test_it_reports_nothing_pending_on_an_empty_database():
    body = _health()

    assert body["derived_pending"] == 0
    assert body["derived_pending_by_kind"] == dict.fromkeys(KINDS, 0)


@pytest.mark.django_db
def test_it_counts_written_turns_until_their_embeddings_and_windows_are_derived(agent):
    response = agent.post("/api/v1/memories/batch", {"items": _turns()})
    assert response.status_code == 200, response.json()

    body = _health()

    # Nothing ran the queued tasks: every turn waits for its embedding and its window.
    assert body["derived_pending_by_kind"]["embeddings"] == len(TURNS)
    assert body["derived_pending_by_kind"]["context_windows"] == len(TURNS)
    assert body["derived_pending"] == sum(body["derived_pending_by_kind"].values()) >= 2 * len(TURNS)
    assert body["embeddings_pending"] == len(TURNS)  # kept for older clients


@pytest.mark.django_db
def test_a_semantic_fact_leaves_no_window_pending(agent):
    response = agent.post("/api/v1/memories", {
        "namespace": ["user", "travel_preferences"], "kind": "preference", "text": "Prefers aisle seats",
        "fact": {"field": "seat", "value": "aisle"}, "source": {"type": "explicit_user_statement", "event_id": "e1"}})
    assert response.status_code == 201, response.json()

    assert _health()["derived_pending_by_kind"]["context_windows"] == 0


@pytest.mark.worker
def test_it_reaches_zero_only_when_retrieval_sees_every_turn_and_window(agent, qcluster):
    response = agent.post("/api/v1/memories/batch", {"items": _turns()})
    assert response.status_code == 200, response.json()
    ids = [r["record"]["memory_id"] for r in response.json()["results"]]

    wait_for(lambda: _health()["derived_pending"] == 0, timeout=90, interval=0.5)

    assert not PendingContext.objects.exists()
    assert MemoryRecord.objects.filter(pk__in=ids, embedding__isnull=True).count() == 0
    assert set(RecordContext.objects.values_list("record_id", flat=True)) == set(ids)
    found = agent.post("/api/v1/retrieve", {"query": "How often does Sam go swimming?", "limit": 3}).json()
    assert ids[1] in [p["memory_id"] for p in found["packets"]]  # matched through its window


def _subject_indexes_pending() -> int:
    return _health()["derived_pending_by_kind"]["subject_indexes"]


@pytest.mark.django_db
def test_a_large_subject_counts_from_its_queued_maintenance_until_its_indexes_are_ready(settings, agent):
    settings.ENGRAM_SUBJECT_INDEX_THRESHOLD = 30
    facts = [{"namespace": ["user", "profile"], "kind": "note", "text": f"Collects postcards from town {n}",
              "fact": {"field": f"postcard_{n}", "value": str(n)},
              "source": {"type": "explicit_user_statement", "event_id": f"evt_pc_{n}"}} for n in range(30)]
    assert agent.post("/api/v1/memories/batch", {"items": facts}).status_code == 200
    subject_id = MemoryRecord.objects.values_list("subject_id", flat=True).distinct().get()
    embed_record_ids(list(MemoryRecord.objects.values_list("pk", flat=True)))

    assert sweep_subject_indexes() == 1  # the schedule finds the subject past the threshold and queues it
    assert _subject_indexes_pending() == 1

    with connection.cursor() as cursor:  # CREATE INDEX refuses a transaction with pending deferred checks
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert subject_index.maintain(subject_id) == "ready"
    assert _subject_indexes_pending() == 0
    assert _health()["derived_pending"] == 0


@pytest.mark.django_db
def test_a_marker_whose_task_was_lost_is_cleared_by_the_schedule_when_nothing_is_due(agent):
    response = agent.post("/api/v1/memories", {
        "namespace": ["user", "profile"], "kind": "note", "text": "Owns a red kayak",
        "fact": {"field": "kayak", "value": "red"}, "source": {"type": "explicit_user_statement", "event_id": "k1"}})
    assert response.status_code == 201, response.json()
    subject_index.queue_maintenance(MemoryRecord.objects.get().subject_id)  # its task never runs
    assert _subject_indexes_pending() == 1

    assert sweep_subject_indexes() == 0  # a small subject: nothing to build

    assert _subject_indexes_pending() == 0
