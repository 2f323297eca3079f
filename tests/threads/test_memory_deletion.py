"""DELETE /api/v1/memories/{id} of a record citing a thread event: its summaries leave retrieval at the request,
and the deletion job regenerates the server ones without the words (client ones stay stale, with a reason)."""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from memory.deletion.models import DeletionJob
from memory.threads.models import Summary
from tests.conftest import memory_body
from tests.threads.conftest import append

pytestmark = pytest.mark.django_db
SAID = "I always take the aisle seat when I fly to Porto."


@pytest.fixture
def sync_tasks(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def summary_packets(agent, query="Porto trip aisle seat"):
    response = agent.post("/api/v1/retrieve", {"query": query, "include": ["summaries"], "budget_tokens": 400})
    assert response.status_code == 200, response.json()
    return [p for p in response.json()["packets"] if p.get("kind") == "summary"]


def test_summaries_over_a_cited_event_are_stale_at_the_delete_and_regenerated_by_the_job(
        agent, thread_id, sync_tasks, django_capture_on_commit_callbacks):
    append(agent, thread_id, "Planning a Porto trip in June.")
    statement = append(agent, thread_id, SAID).json()["event_id"]
    append(agent, thread_id, "Noted, June it is.", role="assistant")
    memory = agent.post("/api/v1/memories", memory_body(
        source={"type": "explicit_user_statement", "event_id": statement, "text": SAID})).json()
    server = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    client = agent.post(f"/api/v1/threads/{thread_id}/summaries", {
        "text": "Porto trip; the user always takes the aisle seat.", "from_seq": 1, "to_seq": 2,
        "referenced_event_ids": [statement]}).json()
    assert "aisle seat" in server["text"]
    assert {p["summary_id"] for p in summary_packets(agent)} == {server["summary_id"], client["summary_id"]}

    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = agent.delete(f"/api/v1/memories/{memory['memory_id']}")

    # At the request, before the job ran: out of GET /summary and retrieval, content gone, no regeneration yet.
    assert response.status_code == 202
    assert len(queued) == 1  # the deletion job only: regenerating now would copy the undeleted event again
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").status_code == 404
    assert summary_packets(agent) == []
    rows = {r["summary_id"]: r for r in agent.get(f"/api/v1/threads/{thread_id}/summaries").json()["results"]}
    assert all(r["status"] == "stale" and r["text"] == "" for r in rows.values())
    assert "not regenerated" in rows[client["summary_id"]]["stale_reason"]

    with django_capture_on_commit_callbacks(execute=True):
        for callback in queued:  # the job, run synchronously; it queues the regeneration in turn
            callback()

    assert DeletionJob.objects.get(pk=response.json()["deletion_id"]).status == "completed"
    fresh = agent.get(f"/api/v1/threads/{thread_id}/summary").json()
    assert fresh["regenerates"] == server["summary_id"]
    assert "Noted, June it is." in fresh["text"] and statement not in fresh["referenced_event_ids"]
    assert Summary.objects.get(pk=client["summary_id"]).status == "stale"  # never regenerated
    for row in Summary.objects.all():
        assert "aisle" not in row.text.lower() and "aisle" not in str(row.unresolved).lower()
    assert [p["summary_id"] for p in summary_packets(agent, "Porto June")] == [fresh["summary_id"]]


def test_a_summary_not_over_the_cited_event_stays_fresh(agent, thread_id):
    append(agent, thread_id, "Planning a Porto trip in June.")
    early = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    statement = append(agent, thread_id, SAID).json()["event_id"]
    memory = agent.post("/api/v1/memories", memory_body(
        source={"type": "explicit_user_statement", "event_id": statement, "text": SAID})).json()

    agent.delete(f"/api/v1/memories/{memory['memory_id']}")

    assert Summary.objects.get(pk=early["summary_id"]).status == "fresh"


def test_an_erasure_request_takes_every_summary_of_the_subject_out_at_once(agent, outsider, thread_id):
    append(agent, thread_id, "Planning a Porto trip in June.")
    mine = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    theirs_thread = outsider.post("/api/v1/threads", {}).json()["thread_id"]
    append(outsider, theirs_thread, "Planning a Porto trip in July.")
    theirs = outsider.post(f"/api/v1/threads/{theirs_thread}/summarize", {}).json()

    assert agent.delete("/api/v1/subject").status_code == 202

    assert Summary.objects.get(pk=mine["summary_id"]).status == "stale"
    assert Summary.objects.get(pk=mine["summary_id"]).text == ""
    assert Summary.objects.get(pk=theirs["summary_id"]).status == "fresh"
