"""A deleted record reads as deleted from the DELETE on, before its job runs; saying the same thing again
afterwards is a new statement that neither the job nor its verification touches; a correction carries
its own idempotency key."""

from __future__ import annotations

import pytest

from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord
from tests.conftest import memory_body
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db


def _write(agent, event_id: str, value: str = "aisle") -> str:
    response = agent.post("/api/v1/memories", memory_body(
        fact={"field": "seat_preference", "value": value}, text=f"Prefers {value} seats",
        source={"type": "explicit_user_statement", "event_id": event_id, "text": f"I want {value} seats"}))
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]


def test_a_deleted_record_leaves_every_read_before_its_job_runs(agent):
    memory_id = _write(agent, "evt_1")
    accepted = agent.delete(f"/api/v1/memories/{memory_id}")
    assert accepted.status_code == 202 and DeletionJob.objects.get().status == "pending"

    detail = agent.get(f"/api/v1/memories/{memory_id}").json()
    assert (detail["status"], detail["fact"], detail["text"]) == ("deleted", {}, "")
    assert agent.get("/api/v1/facts", {"namespace": "user/travel_preferences",
                                       "field": "seat_preference"}).status_code == 404
    assert agent.get("/api/v1/memories", {"status": "active"}).json()["results"] == []
    assert agent.post("/api/v1/retrieve", {"query": "aisle seats"}).json()["packets"] == []
    # The content is still in the row for the job to find what else holds it.
    assert MemoryRecord.objects.get(pk=memory_id).text == "Prefers aisle seats"


def test_restating_a_deleted_fact_is_kept_and_the_job_still_completes(agent):
    memory_id = _write(agent, "evt_1")
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    again = _write(agent, "evt_2")  # the person says it again before the worker got to the job

    assert run_job(job_id) == "completed"
    assert agent.get(f"/api/v1/memories/{again}").json()["text"] == "Prefers aisle seats"
    assert agent.get("/api/v1/facts", {"namespace": "user/travel_preferences",
                                       "field": "seat_preference"}).json()["memory_id"] == again
    assert MemoryRecord.objects.get(pk=memory_id).text == ""


def test_a_replayed_old_event_is_still_refused_after_the_deletion(agent):
    memory_id = _write(agent, "evt_1")
    run_job(agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"])
    replay = agent.post("/api/v1/memories", memory_body(
        fact={"field": "seat_preference", "value": "aisle"}, text="Prefers aisle seats",
        source={"type": "explicit_user_statement", "event_id": "evt_1", "text": "I want aisle seats"}))
    assert (replay.status_code, replay.json()["code"]) == (409, "tombstoned")


def test_a_correction_with_an_event_id_is_made_once(agent):
    memory_id = _write(agent, "evt_1")
    body = {"fact": {"value": "window"}, "text": "Prefers window seats", "source": {"event_id": "evt_fix"}}
    first = agent.post(f"/api/v1/memories/{memory_id}/correct", body)
    again = agent.post(f"/api/v1/memories/{memory_id}/correct", body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["memory_id"] == first.json()["memory_id"] and again.json()["corrects"] == memory_id
    other = agent.post(f"/api/v1/memories/{memory_id}/correct", {**body, "text": "Prefers middle seats"})
    assert (other.status_code, other.json()["code"]) == (409, "idempotency_conflict")
    assert MemoryRecord.objects.filter(field="seat_preference").count() == 2
    unknown = agent.post(f"/api/v1/memories/{memory_id}/correct", {**body, "source": {"event_id": "e", "x": 1}})
    assert unknown.status_code == 400


@pytest.mark.parametrize("value", ["active", "travel"])  # a record's status; a word of the namespace it is under
def test_a_value_that_is_also_a_word_of_the_exports_labels_is_deleted_and_verified(agent, value):
    _write(agent, "evt_other", value="window")  # another record, exported with its status and namespace
    candidate = agent.post("/api/v1/candidates", memory_body(  # exported with its namespace and status too
        fact={"field": "meal", "value": "vegetarian"}, text="Might be vegetarian",
        source={"type": "model_inferred", "event_id": "evt_guess", "text": "ordered a salad"}))
    assert candidate.status_code == 202, candidate.json()
    memory_id = _write(agent, "evt_1", value=value)
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]

    assert run_job(job_id) == "completed"


def test_the_subjects_list_and_export_still_show_a_record_written_before_the_deletion_that_quotes_it(
        agent, settings):
    settings.ENGRAM_DELETION_JOB_RETRIES = 0
    said = 'the 12" screen in the "quiet" room'  # quotes: found as written and as JSON text writes them
    memory_id = _write(agent, "evt_1", value=said)
    quoting = agent.post("/api/v1/memories", memory_body(
        fact={"field": "note", "value": f"she said: {said}"}, text="A note about the office",
        source={"type": "explicit_user_statement", "event_id": "evt_2", "text": "A note"}))
    assert quoting.status_code == 201, quoting.json()
    for n in range(30):  # records the checks need not read
        _write(agent, f"evt_filler_{n}", value=f"window {n}")
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]

    assert run_job(job_id) == "failed"
    reason = DeletionJob.objects.get(pk=job_id).reason
    assert "memory.list" in reason and "export: records" in reason and quoting.json()["memory_id"] in reason
