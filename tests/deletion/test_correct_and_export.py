"""POST /api/v1/memories/{id}/correct and GET /api/v1/export."""

from __future__ import annotations

import json

import pytest

from memory.identity.services import subject_display_name_set
from memory.models import AuditEntry, MemoryRecord, Subject
from memory.threads.models import Summary
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db


def _correct(agent, memory_id, body):
    return agent.post(f"/api/v1/memories/{memory_id}/correct", body)


def test_a_correction_is_a_new_record_that_supersedes_the_old(agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    response = _correct(agent, old, {"fact": {"value": "window"}, "text": "Prefers window seats"})

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["memory_id"] != old and body["corrects"] == old and body["supersedes"] == old
    assert body["fact"] == {"field": "seat_preference", "value": "window"}
    assert body["source"]["type"] == "explicit_user_statement" and body["status"] == "active"
    previous = MemoryRecord.objects.get(pk=old)
    assert previous.status == "superseded" and previous.superseded_by_id == body["memory_id"]
    history = agent.get(f"/api/v1/memories/{body['memory_id']}/history").json()["history"]
    assert [h["memory_id"] for h in history] == [old, body["memory_id"]]
    assert AuditEntry.objects.filter(action="memory.correct", object_id=body["memory_id"]).exists()


def test_summaries_citing_the_corrected_record_go_stale(agent):
    thread_id = agent.post("/api/v1/threads", {"title": "t"}).json()["thread_id"]
    event_id = agent.post(f"/api/v1/threads/{thread_id}/events",
                          {"kind": "message", "role": "user", "text": "aisle please"}).json()["event_id"]
    old = agent.post("/api/v1/memories", memory_body(
        source={"type": "explicit_user_statement", "event_id": event_id})).json()["memory_id"]
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summaries", {
        "text": "Wants aisle", "from_seq": 1, "to_seq": 1}).json()["summary_id"]

    _correct(agent, old, {"fact": {"value": "window"}})

    summary = Summary.objects.get(pk=summary_id)
    assert summary.status == "stale" and old in summary.stale_reason


def test_a_correction_needs_a_value_or_text_and_known_fields(agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    assert _correct(agent, old, {}).status_code == 400
    unknown = _correct(agent, old, {"fact": {"value": "x"}, "status": "active"})
    assert unknown.status_code == 400 and unknown.json()["code"] == "invalid"
    assert _correct(agent, old, {"fact": {"value": "x"}, "subject_id": "usr_else"}).json()["code"] == "scope_mismatch"
    assert MemoryRecord.objects.count() == 1


def test_only_an_active_record_can_be_corrected(agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    _correct(agent, old, {"fact": {"value": "window"}})

    response = _correct(agent, old, {"fact": {"value": "middle"}})

    assert response.status_code == 409 and response.json()["code"] == "not_active"


def test_a_secret_in_a_correction_is_refused(agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    response = _correct(agent, old, {"fact": {"value": "my password is hunter2hunter2"}})

    assert response.status_code == 422 and response.json()["code"] == "secret_detected"


def test_correct_is_scoped(client, agent, outsider, foreign_agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    assert client.post(f"/api/v1/memories/{old}/correct", {}, format="json").status_code == 401
    for other in (outsider, foreign_agent):
        assert _correct(other, old, {"fact": {"value": "window"}}).status_code == 404
    assert MemoryRecord.objects.count() == 1


def test_export_holds_records_with_provenance_candidates_events_and_thread_state(agent, outsider):
    agent.post("/api/v1/memories", memory_body())
    agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "inferred"], kind="trait", fact={"field": "mood", "value": "calm"},
        source={"type": "model_inferred", "event_id": "evt_c"}))
    thread_id = agent.post("/api/v1/threads", {"title": "trip"}).json()["thread_id"]
    agent.post(f"/api/v1/threads/{thread_id}/events", {"kind": "message", "role": "user", "text": "hello"})
    agent.put("/api/v1/workflows/wf/checkpoint", {"current_step": "one"}, headers={"If-None-Match": "*"})
    outsider.post("/api/v1/memories", memory_body(text="Outsider only"))
    subject_display_name_set(subject=Subject.objects.get(external_id="usr_owner"), display_name="Olive Owner")

    response = agent.get("/api/v1/export")

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "attachment" in response["Content-Disposition"]
    body = json.loads(response.content)
    assert body["subject_id"] == "usr_owner" and body["display_name"] == "Olive Owner"
    record = body["records"][0]
    assert record["text"] == "Prefers aisle seats"
    assert record["provenance"]["text"] == "I always take the aisle seat."
    assert [c["fact"]["value"] for c in body["candidates"]] == ["calm"]
    assert {e["external_id"] for e in body["events"]} >= {"evt_seat_1", "evt_c"}
    assert [t["id"] for t in body["threads"]] == [thread_id]
    assert [e["text"] for e in body["thread_events"]] == ["hello"]
    assert [c["workflow_id"] for c in body["checkpoints"]] == ["wf"]
    assert "summaries" in body and "retrieval_logs" in body
    assert "Outsider only" not in response.content.decode()


def test_export_needs_a_principal(client, make_agent, tenant):
    assert client.get("/api/v1/export").status_code == 401
    assert make_agent(tenant, subject=None).get("/api/v1/export").status_code == 401
