"""What framework sessions need from the thread API: a thread named by an Idempotency-Key, the last N events
in one request, an all-or-nothing batch append, popping the last event, and clearing a thread through a
deletion job."""

from __future__ import annotations

import pytest

from memory.deletion.models import DeletionJob
from memory.models import AuditEntry
from memory.threads.models import Summary, ThreadEvent
from tests.deletion.helpers import run_job, tables_containing
from tests.threads.conftest import append, new_thread

pytestmark = pytest.mark.django_db


def _events(agent, thread_id, **params):
    response = agent.get(f"/api/v1/threads/{thread_id}/events", params)
    assert response.status_code == 200, response.json()
    return response.json()


def _batch(agent, thread_id, events):
    return agent.post(f"/api/v1/threads/{thread_id}/events/batch", {"events": events})


def _msg(text, key=None, role="user"):
    event = {"kind": "message", "role": role, "text": text}
    return {**event, "idempotency_key": key} if key else event


# --- a thread named by its Idempotency-Key ------------------------------------------------------------------


def test_an_idempotency_key_names_the_thread(agent, outsider):
    body = {"title": "support-42", "metadata": {"session_id": "support-42"}}
    first = agent.post("/api/v1/threads", body, headers={"Idempotency-Key": "session:support-42"})
    again = agent.post("/api/v1/threads", body, headers={"Idempotency-Key": "session:support-42"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["thread_id"] == first.json()["thread_id"]
    other = agent.post("/api/v1/threads", {**body, "title": "other"}, headers={"Idempotency-Key": "session:support-42"})
    assert (other.status_code, other.json()["code"]) == (409, "idempotency_conflict")
    theirs = outsider.post("/api/v1/threads", body, headers={"Idempotency-Key": "session:support-42"})
    assert theirs.status_code == 201 and theirs.json()["thread_id"] != first.json()["thread_id"]
    assert AuditEntry.objects.filter(action="thread.create").count() == 2


# --- reading the tail -------------------------------------------------------------------------------------


def test_tail_returns_the_last_events_in_one_request_oldest_first(agent, thread_id):
    for n in range(1, 8):
        append(agent, thread_id, f"message {n}")
    ThreadEvent.objects.filter(thread_id=thread_id, seq=6).update(status="deleted", text="")

    tail = _events(agent, thread_id, tail=3)
    assert ([e["seq"] for e in tail["results"]], tail["next_before"]) == ([5, 6, 7], 5)
    older = _events(agent, thread_id, tail=3, before=tail["next_before"])
    assert ([e["seq"] for e in older["results"]], older["next_before"]) == ([2, 3, 4], 2)
    recorded = _events(agent, thread_id, tail=3, status="recorded")
    assert [e["seq"] for e in recorded["results"]] == [4, 5, 7]
    assert [e["seq"] for e in _events(agent, thread_id, tail=50)["results"]] == [1, 2, 3, 4, 5, 6, 7]
    assert _events(agent, thread_id, tail=50)["next_before"] is None
    assert agent.get(f"/api/v1/threads/{thread_id}/events", {"tail": 0}).status_code == 400


def test_another_subject_cannot_read_the_tail(agent, outsider, thread_id):
    append(agent, thread_id, "private")
    assert outsider.get(f"/api/v1/threads/{thread_id}/events", {"tail": 1}).status_code == 404


# --- batch append ---------------------------------------------------------------------------------------------


def test_a_batch_is_appended_in_order_with_consecutive_seqs(agent, thread_id):
    append(agent, thread_id, "before")
    response = _batch(agent, thread_id, [_msg("one", "k1"), {"kind": "other", "data": {"item": {"type": "x"}}},
                                         _msg("three", "k3", role="assistant")])
    assert response.status_code == 201, response.json()
    assert [(e["seq"], e["kind"]) for e in response.json()["results"]] == [(2, "message"), (3, "other"), (4, "message")]
    replay = _batch(agent, thread_id, [_msg("one", "k1"), _msg("three", "k3", role="assistant")])
    assert (replay.status_code, replay.json()["created"]) == (200, 0)
    assert [e["seq"] for e in replay.json()["results"]] == [2, 4]


def test_a_batch_is_all_or_nothing(agent, thread_id):
    refused = _batch(agent, thread_id, [_msg("fine"), _msg("my password is hunter2-secret")])
    assert (refused.status_code, refused.json()["code"]) == (422, "secret_detected")
    invalid = _batch(agent, thread_id, [_msg("fine"), {"kind": "message", "role": "user", "text": ""}])
    assert invalid.status_code == 400 and "events.1" in invalid.json()["detail"]
    assert _events(agent, thread_id)["results"] == []
    assert ThreadEvent.objects.filter(thread_id=thread_id).count() == 0
    too_many = _batch(agent, thread_id, [_msg(f"m{n}") for n in range(101)])
    assert too_many.status_code == 400
    same_key = _batch(agent, thread_id, [_msg("a", "dup"), _msg("b", "dup")])
    assert (same_key.status_code, same_key.json()["code"]) == (400, "invalid_idempotency_key")


def test_event_data_holds_a_large_item_up_to_its_own_limit(agent, thread_id, settings):
    settings.ENGRAM_MAX_EVENT_DATA_BYTES = 64 * 1024
    big = {"item": {"type": "function_call_output", "output": "x" * 40_000}}
    assert append(agent, thread_id, kind="tool_result", data=big).status_code == 201
    too_big = append(agent, thread_id, kind="tool_result", data={"item": {"output": "x" * 70_000}})
    assert too_big.status_code == 400 and "65536 bytes" in too_big.json()["detail"]


def test_batch_needs_write_and_stays_in_scope(agent, outsider, make_agent, tenant, thread_id):
    assert _batch(outsider, thread_id, [_msg("hi")]).status_code == 404
    reader = make_agent(tenant, "usr_owner", scopes=["read"])
    assert _batch(reader, thread_id, [_msg("hi")]).json()["code"] == "insufficient_scope"
    mismatch = _batch(agent, thread_id, [{**_msg("hi"), "subject_id": "usr_outsider"}])
    assert (mismatch.status_code, mismatch.json()["code"]) == (400, "scope_mismatch")


# --- pop --------------------------------------------------------------------------------------------------------


def test_pop_takes_the_last_recorded_event_and_returns_its_content(agent, thread_id):
    append(agent, thread_id, "first")
    append(agent, thread_id, "second", kind="tool_result", data={"item": {"output": "42"}})
    summary = agent.post(f"/api/v1/threads/{thread_id}/summaries",
                         {"text": "first then 42", "from_seq": 1, "to_seq": 2}).json()

    popped = agent.post(f"/api/v1/threads/{thread_id}/events/pop")
    assert popped.status_code == 200
    event = popped.json()["event"]
    assert (event["seq"], event["data"], event["status"]) == (2, {"item": {"output": "42"}}, "deleted")
    row = ThreadEvent.objects.get(pk=event["event_id"])
    assert (row.status, row.data, row.text) == ("deleted", {}, "")
    assert Summary.objects.get(pk=summary["summary_id"]).status == "stale"
    assert agent.post(f"/api/v1/threads/{thread_id}/events/pop").json()["event"]["text"] == "first"
    assert agent.post(f"/api/v1/threads/{thread_id}/events/pop").json() == {"thread_id": thread_id, "event": None}
    assert append(agent, thread_id, "third").json()["seq"] == 3
    assert AuditEntry.objects.filter(action="thread_event.pop").count() == 2


def test_pop_is_refused_to_another_subject_and_to_a_read_only_key(agent, outsider, make_agent, tenant, thread_id):
    append(agent, thread_id, "mine")
    assert outsider.post(f"/api/v1/threads/{thread_id}/events/pop").status_code == 404
    reader = make_agent(tenant, "usr_owner", scopes=["read"])
    assert reader.post(f"/api/v1/threads/{thread_id}/events/pop").status_code == 403
    assert _events(agent, thread_id, status="recorded")["results"][0]["text"] == "mine"


# --- clear ------------------------------------------------------------------------------------------------------


MARKER = "zebracrossing4417"


def test_clear_blanks_the_events_at_once_and_a_job_finishes_and_verifies(agent, thread_id):
    append(agent, thread_id, f"I live near the {MARKER}")
    append(agent, thread_id, "ok", role="assistant")
    agent.post(f"/api/v1/threads/{thread_id}/summarize")
    served = agent.post("/api/v1/retrieve", {"query": MARKER, "include": ["summaries"]}).json()
    assert [p["source"] for p in served["packets"]] == ["summaries"]

    response = agent.delete(f"/api/v1/threads/{thread_id}/events")
    assert response.status_code == 202
    body = response.json()
    assert (body["up_to_seq"], body["cleared"], body["status"]) == (2, 2, "pending")
    assert _events(agent, thread_id, status="recorded")["results"] == []
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").status_code == 404

    assert run_job(body["deletion_id"]) == "completed"
    job = agent.get(body["status_url"]).json()
    assert job["kind"] == "thread" and {s["name"] for s in job["steps"]} >= {"thread_retrieval_logs", "verification"}
    # Only the agent's own retrieval query still says it: that is the caller's question, not the thread.
    # (``quotes`` is the database's index column of that query's words.)
    assert sorted(tables_containing(MARKER)) == ["retrieval_retrievallog.query", "retrieval_retrievallog.quotes"]
    assert agent.delete(f"/api/v1/threads/{thread_id}/events").json()["deletion_id"] == body["deletion_id"]

    assert append(agent, thread_id, "a new conversation").json()["seq"] == 3
    assert [e["text"] for e in _events(agent, thread_id, status="recorded")["results"]] == ["a new conversation"]


def test_clear_is_scoped_and_needs_write(agent, outsider, make_agent, tenant, thread_id):
    append(agent, thread_id, "mine")
    assert outsider.delete(f"/api/v1/threads/{thread_id}/events").status_code == 404
    reader = make_agent(tenant, "usr_owner", scopes=["read"])
    assert reader.delete(f"/api/v1/threads/{thread_id}/events").status_code == 403
    assert not DeletionJob.objects.exists()
    assert len(_events(agent, thread_id, status="recorded")["results"]) == 1


def test_clearing_one_thread_leaves_the_others(agent, thread_id):
    other = new_thread(agent, "other")
    append(agent, thread_id, f"{MARKER} here")
    append(agent, other, f"{MARKER} there")
    job = agent.delete(f"/api/v1/threads/{thread_id}/events").json()
    assert run_job(job["deletion_id"]) == "completed"
    assert [e["text"] for e in _events(agent, other)["results"]] == [f"{MARKER} there"]
