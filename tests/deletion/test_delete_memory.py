"""DELETE /api/v1/memories/{id}: one tracked job that reaches every surface, then verifies every read."""

from __future__ import annotations

import pytest

from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord, Tombstone
from memory.retrieval.embedding import embed_record_ids
from tests.conftest import memory_body
from tests.deletion.helpers import run_job, tables_containing

pytestmark = pytest.mark.django_db

MARKER = "qzvmarker7731"


def _spread_everywhere(agent) -> dict:
    """A record that is embedded, indexed, retrieved (logs), cited by a summary and a checkpoint."""
    thread_id = agent.post("/api/v1/threads", {"title": "trip planning"}).json()["thread_id"]
    said = f"Please always book me {MARKER} seats on long flights"
    event = agent.post(f"/api/v1/threads/{thread_id}/events", {"kind": "message", "role": "user", "text": said})
    assert event.status_code == 201, event.json()
    event_id = event.json()["event_id"]
    created = agent.post("/api/v1/memories", memory_body(
        fact={"field": "seat_preference", "value": f"{MARKER} aisle"}, text=f"Prefers {MARKER} aisle seats",
        source={"type": "explicit_user_statement", "event_id": event_id, "text": said}))
    assert created.status_code == 201, created.json()
    memory_id = created.json()["memory_id"]
    assert embed_record_ids([memory_id]) == 1
    retrieved = agent.post("/api/v1/retrieve", {"query": f"{MARKER} aisle seats"})
    assert memory_id in [p.get("memory_id") for p in retrieved.json()["packets"]]
    summary = agent.post(f"/api/v1/threads/{thread_id}/summaries", {
        "text": f"The user wants {MARKER} seats.", "from_seq": 1, "to_seq": 1, "referenced_event_ids": [event_id]})
    assert summary.status_code == 201, summary.json()
    checkpoint = agent.put("/api/v1/workflows/wf_trip/checkpoint", {
        "thread_id": thread_id, "current_step": "book", "artifacts": {"seat": f"{MARKER} aisle", "memory": memory_id}},
        headers={"If-None-Match": "*"})
    assert checkpoint.status_code in (200, 201), checkpoint.json()
    candidate = agent.post("/api/v1/candidates", memory_body(
        fact={"field": "seat_preference", "value": f"{MARKER} aisle"}, text=f"Likes {MARKER} aisle seats",
        source={"type": "model_inferred", "event_id": "evt_guess_1", "text": f"user mentioned {MARKER}"}))
    assert candidate.status_code == 202, candidate.json()
    return {"memory_id": memory_id, "thread_id": thread_id, "event_id": event_id}


def test_it_reaches_every_surface_and_completes_only_after_verification(agent):
    ids = _spread_everywhere(agent)
    before = tables_containing(MARKER)
    assert {"memory_memoryrecord.text", "memory_event.text", "memory_candidate.evidence"} <= set(before)
    assert any(t.startswith("threads_summary") for t in before) and any(t.startswith("threads_checkpoint")
                                                                         for t in before)
    assert any(t.startswith("retrieval_retrievallog") for t in before)

    response = agent.delete(f"/api/v1/memories/{ids['memory_id']}")

    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["deletion_id"].startswith("del_") and body["status"] == "pending"
    assert body["status_url"] == f"/api/v1/deletions/{body['deletion_id']}"
    assert run_job(body["deletion_id"]) == "completed"
    status = agent.get(body["status_url"]).json()
    assert status["status"] == "completed"
    steps = {s["name"]: s for s in status["steps"]}
    assert {"candidates", "embedding", "text_index", "thread_events", "summaries", "checkpoints",
            "retrieval_logs", "audit", "events", "records", "caches", "tombstone", "verification"} <= set(steps)
    assert all(s["status"] == "done" and s["attempts"] == 1 for s in steps.values())
    assert list(steps)[-1] == "verification"
    # The strong assertion: the marker is in no column of any table.
    assert tables_containing(MARKER) == []
    record = MemoryRecord.objects.get(pk=ids["memory_id"])
    assert record.status == "deleted" and record.embedding is None and record.search_vector is None
    assert Tombstone.objects.filter(memory_id=ids["memory_id"]).exists()
    assert DeletionJob.objects.get(pk=body["deletion_id"]).markers_sealed == ""


def test_no_read_endpoint_serves_the_deleted_content(agent):
    ids = _spread_everywhere(agent)
    job_id = agent.delete(f"/api/v1/memories/{ids['memory_id']}").json()["deletion_id"]
    run_job(job_id)

    detail = agent.get(f"/api/v1/memories/{ids['memory_id']}")
    assert detail.status_code == 200 and detail.json()["status"] == "deleted"
    reads = [detail, agent.get("/api/v1/memories"), agent.get(f"/api/v1/memories/{ids['memory_id']}/history"),
             agent.get("/api/v1/export"), agent.get(f"/api/v1/threads/{ids['thread_id']}/events"),
             agent.get(f"/api/v1/threads/{ids['thread_id']}/summaries"),
             agent.get("/api/v1/workflows/wf_trip/checkpoint"),
             agent.post("/api/v1/retrieve", {"query": f"{MARKER} aisle seats"})]
    for response in reads:
        assert response.status_code == 200, response.content
        assert MARKER not in response.content.decode(), response.request["PATH_INFO"]
    assert agent.get("/api/v1/facts", {"namespace": "user/travel_preferences", "field": "seat_preference"}
                     ).status_code == 404


def test_deleting_twice_returns_the_same_job(agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    first = agent.delete(f"/api/v1/memories/{memory_id}")
    second = agent.delete(f"/api/v1/memories/{memory_id}")
    run_job(first.json()["deletion_id"])
    third = agent.delete(f"/api/v1/memories/{memory_id}")

    assert first.status_code == second.status_code == third.status_code == 202
    assert first.json()["deletion_id"] == second.json()["deletion_id"] == third.json()["deletion_id"]
    assert third.json()["status"] == "completed"
    assert DeletionJob.objects.count() == 1


def test_it_deletes_the_versions_the_record_superseded(agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    new = agent.post("/api/v1/memories", memory_body(
        fact={"field": "seat_preference", "value": "window"}, text="Prefers window seats",
        source={"type": "explicit_user_statement", "event_id": "evt_seat_2"})).json()["memory_id"]

    run_job(agent.delete(f"/api/v1/memories/{new}").json()["deletion_id"])

    assert set(MemoryRecord.objects.values_list("pk", "status")) == {(old, "deleted"), (new, "deleted")}
    assert tables_containing("Prefers aisle seats") == [] and tables_containing("window seats") == []


def test_it_needs_credentials(client, agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    assert client.delete(f"/api/v1/memories/{memory_id}").status_code == 401
    assert client.get("/api/v1/deletions/del_x").status_code == 401
    assert MemoryRecord.objects.get(pk=memory_id).status == "active"


def test_another_subject_or_tenant_gets_404_for_the_record_and_the_job(agent, outsider, foreign_agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]

    for other in (outsider, foreign_agent):
        response = other.delete(f"/api/v1/memories/{memory_id}")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
        assert other.get(f"/api/v1/deletions/{job_id}").status_code == 404
    assert DeletionJob.objects.count() == 1


def test_a_read_only_key_may_not_delete(make_agent, tenant, agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    response = reader.delete(f"/api/v1/memories/{memory_id}")

    assert response.status_code == 403 and response.json()["code"] == "insufficient_scope"
    assert not DeletionJob.objects.exists()
