"""POST /api/v1/memories: explicit user statements become confirmed records at once."""

from __future__ import annotations

import pytest

from memory.models import AuditEntry, Event, MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


def test_it_stores_a_confirmed_record_in_the_contract_shape(agent):
    response = agent.post(URL, memory_body())

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["memory_id"].startswith("mem_")
    assert body["subject_id"] == "usr_owner"
    assert body["namespace"] == ["user", "travel_preferences"]
    assert body["kind"] == "preference"
    assert body["type"] == "semantic"
    assert body["fact"] == {"field": "seat_preference", "value": "aisle"}
    assert body["text"] == "Prefers aisle seats"
    assert body["source"] == {"type": "explicit_user_statement", "event_id": "evt_seat_1"}
    assert body["confidence"] == "confirmed"
    assert body["sensitivity"] == "personal"
    assert body["memory_class"] == "travel_preferences"
    assert body["status"] == "active"
    assert body["valid_from"] and body["created_at"]
    assert body["valid_until"] is None
    assert body["supersedes"] is None and body["superseded_by"] is None


def test_it_references_an_event_and_writes_an_audit_row(agent):
    memory_id = agent.post(URL, memory_body()).json()["memory_id"]

    record = MemoryRecord.objects.get(pk=memory_id)
    assert record.source_event.external_id == "evt_seat_1"
    assert record.source_event.text == "I always take the aisle seat."
    assert AuditEntry.objects.filter(
        action="memory.write", object_id=memory_id, actor__startswith="agent_key:"
    ).exists()


def test_it_fills_the_full_text_vector_on_write(agent):
    memory_id = agent.post(URL, memory_body()).json()["memory_id"]

    assert MemoryRecord.objects.filter(pk=memory_id, search_vector="aisle").exists()


def test_it_returns_the_same_record_with_200_when_the_event_was_seen_before(agent):
    first = agent.post(URL, memory_body())
    second = agent.post(URL, memory_body())

    assert first.status_code == 201
    assert second.status_code == 200
    assert second.json()["memory_id"] == first.json()["memory_id"]
    assert MemoryRecord.objects.count() == 1
    assert Event.objects.count() == 1


def test_it_refuses_a_reused_event_id_with_different_content(agent):
    agent.post(URL, memory_body())
    response = agent.post(URL, memory_body(fact={"field": "seat_preference", "value": "window"}))

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_conflict"
    assert MemoryRecord.objects.count() == 1


def test_it_applies_the_class_default_ttl(agent):
    response = agent.post(URL, memory_body(namespace=["episodes"], kind="episode",
                                           fact={"field": "trip", "value": "Lisbon"}, text="Went to Lisbon"))

    assert response.status_code == 201
    assert response.json()["valid_until"] is not None
