"""Summaries that know their source: server and client summaries, staleness, regeneration."""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from memory.models import AuditEntry
from memory.threads.models import Summary
from tests.threads.conftest import append

pytestmark = pytest.mark.django_db


@pytest.fixture
def sync_tasks(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def conversation(agent, thread_id):
    ids = [
        append(agent, thread_id, "I need a flight to Lisbon on May 4. I prefer the morning.").json()["event_id"],
        append(agent, thread_id, "Found TP1234 at 9:05 for 180 EUR.", role="assistant").json()["event_id"],
        append(agent, thread_id, kind="approval", role="assistant",
               data={"approval_id": "ap_1", "status": "requested"},
               text="Approve charging 180 EUR?").json()["event_id"],
        append(agent, thread_id, "Also, is there a lounge at Lisbon airport?").json()["event_id"],
    ]
    return ids


def test_summarize_makes_a_deterministic_extractive_summary_with_its_sources(agent, thread_id):
    ids = conversation(agent, thread_id)

    response = agent.post(f"/api/v1/threads/{thread_id}/summarize", {})
    again = agent.post(f"/api/v1/threads/{thread_id}/summarize", {})

    assert response.status_code == 201
    body = response.json()
    assert body["summary_id"].startswith("sum_")
    assert body["origin"] == "server"
    assert body["source_range"] == {"from_seq": 1, "to_seq": 4}
    assert body["summarizer"] == {"name": "extractive", "version": "1"}
    assert body["status"] == "fresh" and body["stale_reason"] is None and body["created_at"]
    assert "user: I need a flight to Lisbon on May 4." in body["text"]
    assert "I prefer the morning" not in body["text"]  # first sentence only
    assert "approval ap_1 requested" in body["text"]
    assert body["referenced_event_ids"] == ids
    assert [item["type"] for item in body["unresolved"]] == ["pending_approval", "unanswered_question"]
    assert body["unresolved"][0]["approval_id"] == "ap_1"
    assert body["unresolved"][1]["event_id"] == ids[3]
    assert again.json()["text"] == body["text"]  # deterministic
    assert AuditEntry.objects.filter(action="summary.create", object_id=body["summary_id"]).exists()


def test_a_granted_approval_and_an_answer_resolve_the_open_items(agent, thread_id):
    conversation(agent, thread_id)
    append(agent, thread_id, kind="approval", role="user", data={"approval_id": "ap_1", "status": "granted"})
    append(agent, thread_id, "Yes, there is a lounge.", role="assistant")

    body = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()

    assert body["unresolved"] == []


def test_a_tool_call_without_a_result_is_unresolved(agent, thread_id):
    call = append(agent, thread_id, kind="tool_call", role="assistant",
                  data={"tool": "payments.charge", "tool_call_id": "call_7"}).json()

    body = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()

    assert body["unresolved"] == [{"type": "tool_call_without_result", "tool_call_id": "call_7",
                                   "event_id": call["event_id"], "seq": 1}]


def test_summarize_takes_a_range(agent, thread_id):
    conversation(agent, thread_id)

    body = agent.post(f"/api/v1/threads/{thread_id}/summarize", {"from_seq": 2, "to_seq": 3}).json()

    assert body["source_range"] == {"from_seq": 2, "to_seq": 3}
    assert "Lisbon on May 4" not in body["text"] and "TP1234" in body["text"]


@pytest.mark.parametrize("body", [{"from_seq": 3, "to_seq": 2}, {"to_seq": 9}])
def test_an_invalid_range_is_400(agent, thread_id, body):
    conversation(agent, thread_id)

    response = agent.post(f"/api/v1/threads/{thread_id}/summarize", body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_range"


def test_an_empty_thread_cannot_be_summarized(agent, thread_id):
    assert agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).status_code == 400


def test_it_stores_a_client_summary(agent, thread_id):
    ids = conversation(agent, thread_id)

    response = agent.post(f"/api/v1/threads/{thread_id}/summaries", {
        "text": "User wants a morning flight to Lisbon on May 4; approval pending.", "from_seq": 1, "to_seq": 3,
        "unresolved": [{"type": "pending_approval", "approval_id": "ap_1"}], "referenced_event_ids": ids[:3],
        "summarizer": {"name": "agent-notes", "version": "2"}})

    assert response.status_code == 201
    body = response.json()
    assert body["origin"] == "client"
    assert body["summarizer"] == {"name": "agent-notes", "version": "2"}
    assert body["referenced_event_ids"] == ids[:3]


def test_a_client_summary_must_reference_events_of_the_thread(agent, thread_id, outsider):
    conversation(agent, thread_id)

    response = agent.post(f"/api/v1/threads/{thread_id}/summaries",
                          {"text": "x", "from_seq": 1, "to_seq": 1, "referenced_event_ids": ["evt_nope"]})

    assert response.status_code == 400
    assert response.json()["code"] == "unknown_event"


def test_a_client_summary_with_a_secret_is_refused(agent, thread_id):
    conversation(agent, thread_id)

    response = agent.post(f"/api/v1/threads/{thread_id}/summaries",
                          {"text": "The user's password is hunter2hunter2.", "from_seq": 1, "to_seq": 1})

    assert response.status_code == 422
    assert not Summary.objects.exists()


def test_get_summary_returns_the_latest_fresh_one(agent, thread_id):
    conversation(agent, thread_id)
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").status_code == 404
    agent.post(f"/api/v1/threads/{thread_id}/summarize", {"to_seq": 2})
    latest = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()

    response = agent.get(f"/api/v1/threads/{thread_id}/summary")

    assert response.status_code == 200
    assert response.json()["summary_id"] == latest["summary_id"]


def test_deleting_a_covered_event_makes_the_summary_stale_at_once_and_regenerates_it_without_the_text(
        agent, thread_id, sync_tasks, django_capture_on_commit_callbacks):
    conversation(agent, thread_id)
    secret_plan = append(agent, thread_id, "Keep it quiet: the trip is a surprise for Ana.").json()["event_id"]
    append(agent, thread_id, "Understood.", role="assistant")
    summary = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    assert "surprise for Ana" in summary["text"]

    with django_capture_on_commit_callbacks(execute=False) as queued:
        deleted = agent.delete(f"/api/v1/threads/{thread_id}/events/{secret_plan}")
    # Stale at once, before any task ran: not served, content gone.
    assert deleted.json()["stale_summaries"] == [summary["summary_id"]]
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").status_code == 404
    stale = Summary.objects.get(pk=summary["summary_id"])
    assert stale.status == "stale" and "deleted" in stale.stale_reason and stale.text == ""
    assert len(queued) == 1

    for callback in queued:  # the queued regeneration, run synchronously
        callback()

    fresh = agent.get(f"/api/v1/threads/{thread_id}/summary").json()
    assert fresh["summary_id"] != summary["summary_id"]
    assert fresh["regenerates"] == summary["summary_id"]
    assert fresh["source_range"] == summary["source_range"]
    assert secret_plan not in fresh["referenced_event_ids"]
    assert "Understood." in fresh["text"]
    for row in Summary.objects.all():
        assert "surprise" not in row.text and "Ana" not in row.text
        assert "Ana" not in str(row.unresolved)
    assert Summary.objects.get(pk=summary["summary_id"]).replaced_by_id == fresh["summary_id"]
    assert AuditEntry.objects.filter(action="summary.regenerate", object_id=fresh["summary_id"]).exists()


def test_regeneration_is_idempotent(agent, thread_id, sync_tasks, django_capture_on_commit_callbacks):
    from memory.threads.tasks import regenerate_summary

    ids = conversation(agent, thread_id)
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()["summary_id"]
    with django_capture_on_commit_callbacks(execute=True):
        agent.delete(f"/api/v1/threads/{thread_id}/events/{ids[1]}")

    assert regenerate_summary(summary_id) is None  # a re-delivered task does nothing
    assert Summary.objects.filter(status="fresh").count() == 1
    assert Summary.objects.count() == 2


def test_a_client_summary_stays_stale_with_a_reason_and_loses_deleted_text(
        agent, thread_id, sync_tasks, django_capture_on_commit_callbacks):
    ids = conversation(agent, thread_id)
    client = agent.post(f"/api/v1/threads/{thread_id}/summaries",
                        {"text": "Flight TP1234 for 180 EUR.", "from_seq": 1, "to_seq": 2}).json()

    with django_capture_on_commit_callbacks(execute=True):
        agent.delete(f"/api/v1/threads/{thread_id}/events/{ids[1]}")

    rows = agent.get(f"/api/v1/threads/{thread_id}/summaries").json()["results"]
    assert len(rows) == 1
    assert rows[0]["summary_id"] == client["summary_id"]
    assert rows[0]["status"] == "stale"
    assert "not regenerated" in rows[0]["stale_reason"]
    assert rows[0]["text"] == ""


def test_a_correction_of_a_covered_event_makes_the_summary_stale_and_the_regeneration_uses_it(
        agent, thread_id, sync_tasks, django_capture_on_commit_callbacks):
    ids = conversation(agent, thread_id)
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()["summary_id"]

    with django_capture_on_commit_callbacks(execute=True):
        append(agent, thread_id, "Correction: I need the flight on May 5.", corrects=ids[0])

    old = Summary.objects.get(pk=summary_id)
    assert old.status == "stale" and "corrected" in old.stale_reason
    fresh = agent.get(f"/api/v1/threads/{thread_id}/summary").json()
    assert fresh["regenerates"] == summary_id
    assert "May 4" not in fresh["text"] and ids[0] not in fresh["referenced_event_ids"]
    assert "May 5" in fresh["text"]
    assert fresh["source_range"] == {"from_seq": 1, "to_seq": 5}  # extended to the correction


def test_a_summary_not_covering_the_deleted_event_stays_fresh(agent, thread_id, sync_tasks):
    ids = conversation(agent, thread_id)
    early = agent.post(f"/api/v1/threads/{thread_id}/summarize", {"to_seq": 2}).json()

    agent.delete(f"/api/v1/threads/{thread_id}/events/{ids[3]}")

    assert Summary.objects.get(pk=early["summary_id"]).status == "fresh"
