"""POST/GET /api/v1/threads/{id}/events: an append-only, server-ordered log with idempotent appends."""

from __future__ import annotations

import pytest

from memory.models import AuditEntry
from memory.threads.models import Thread, ThreadEvent
from tests.conftest import memory_body
from tests.threads.conftest import append, new_thread

pytestmark = pytest.mark.django_db


def test_it_creates_a_thread_for_the_principals_subject(agent):
    response = agent.post("/api/v1/threads", {"title": "Trip", "metadata": {"channel": "chat"}})

    assert response.status_code == 201
    body = response.json()
    assert body["thread_id"].startswith("thr_")
    assert body["subject_id"] == "usr_owner"
    assert body["last_seq"] == 0
    thread = Thread.objects.get(pk=body["thread_id"])
    assert thread.subject_id == agent.subject.pk and thread.tenant_id == agent.tenant.pk
    assert AuditEntry.objects.filter(action="thread.create", object_id=thread.pk).exists()


def test_it_lists_the_subjects_threads_only(agent, outsider, foreign_agent):
    mine = [new_thread(agent, "one"), new_thread(agent, "two")]
    new_thread(outsider, "theirs")
    new_thread(foreign_agent, "foreign")

    page = agent.get("/api/v1/threads", {"limit": 1}).json()
    rest = agent.get("/api/v1/threads", {"offset": page["next_offset"]}).json()

    assert [t["thread_id"] for t in page["results"] + rest["results"]] == mine[::-1]
    assert rest["next_offset"] is None


def test_it_refuses_a_body_subject_that_differs_from_the_token(agent):
    response = agent.post("/api/v1/threads", {"subject_id": "usr_someone_else"})

    assert response.status_code == 400
    assert response.json()["code"] == "scope_mismatch"


def test_it_numbers_events_in_order_with_public_event_ids(agent, thread_id):
    first = append(agent, thread_id, "I need a flight to Lisbon.")
    second = append(agent, thread_id, "Sure, which dates?", role="assistant")
    third = append(agent, thread_id, kind="tool_call", role="assistant",
                   data={"tool": "search_flights", "tool_call_id": "call_1", "arguments": {"to": "LIS"}})

    assert [r.status_code for r in (first, second, third)] == [201, 201, 201]
    assert [r.json()["seq"] for r in (first, second, third)] == [1, 2, 3]
    assert first.json()["event_id"].startswith("evt_")
    assert third.json()["data"]["tool"] == "search_flights"
    assert agent.get(f"/api/v1/threads/{thread_id}").json()["last_seq"] == 3


def test_it_returns_the_original_event_with_200_for_a_repeated_idempotency_key(agent, thread_id):
    first = append(agent, thread_id, "Book the 9am flight.", key="k-1")
    again = append(agent, thread_id, "Book the 9am flight.", key="k-1")

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == first.json()
    assert ThreadEvent.objects.count() == 1


def test_it_refuses_a_reused_idempotency_key_with_a_different_body(agent, thread_id):
    append(agent, thread_id, "Book the 9am flight.", key="k-1")
    response = append(agent, thread_id, "Book the 5pm flight.", key="k-1")

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_conflict"
    assert ThreadEvent.objects.count() == 1


def test_the_same_key_in_another_thread_is_another_event(agent, thread_id):
    other = new_thread(agent, "Other")
    append(agent, thread_id, "Hello.", key="k-1")

    assert append(agent, other, "Hello.", key="k-1").status_code == 201
    assert ThreadEvent.objects.count() == 2


def test_it_pages_with_after_and_limit(agent, thread_id):
    for n in range(5):
        append(agent, thread_id, f"message {n}")

    page = agent.get(f"/api/v1/threads/{thread_id}/events", {"after": 1, "limit": 2}).json()
    rest = agent.get(f"/api/v1/threads/{thread_id}/events", {"after": page["next_after"], "limit": 10}).json()

    assert [e["seq"] for e in page["results"]] == [2, 3]
    assert page["next_after"] == 3
    assert [e["seq"] for e in rest["results"]] == [4, 5]
    assert rest["next_after"] is None


def test_it_rejects_bad_paging_with_400(agent, thread_id):
    response = agent.get(f"/api/v1/threads/{thread_id}/events", {"limit": 0})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


@pytest.mark.parametrize("body", [
    {"kind": "gossip", "text": "hi"},
    {"kind": "message", "text": ""},
    {"kind": "message", "text": "hi", "seq": 7},
    {"kind": "message", "text": "hi", "data": ["not", "an", "object"]},
    {"kind": "message", "role": "wizard", "text": "hi"},
])
def test_it_refuses_invalid_events_with_400_and_writes_nothing(agent, thread_id, body):
    response = agent.post(f"/api/v1/threads/{thread_id}/events", body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert ThreadEvent.objects.count() == 0


def test_it_refuses_secrets_and_stores_nothing(agent, thread_id):
    response = append(agent, thread_id, "my password is hunter2hunter2", key="k-secret")

    assert response.status_code == 422
    assert response.json()["code"] == "secret_detected"
    assert "hunter2" not in response.json()["detail"]
    assert ThreadEvent.objects.count() == 0
    assert Thread.objects.get(pk=thread_id).last_seq == 0


def test_it_refuses_secrets_in_tool_arguments(agent, thread_id):
    response = append(agent, thread_id, kind="tool_call", role="assistant",
                      data={"tool": "pay", "arguments": {"card": "4111 1111 1111 1111"}})

    assert response.status_code == 422
    assert ThreadEvent.objects.count() == 0


def test_a_correction_is_a_new_event_referencing_the_corrected_one(agent, thread_id):
    wrong = append(agent, thread_id, "I fly on the 3rd.").json()
    fix = append(agent, thread_id, "Sorry, I fly on the 4th.", corrects=wrong["event_id"])

    assert fix.status_code == 201
    assert fix.json()["corrects"] == wrong["event_id"]
    assert ThreadEvent.objects.get(pk=wrong["event_id"]).text == "I fly on the 3rd."


def test_a_correction_must_name_an_event_of_the_same_thread(agent, thread_id):
    other = new_thread(agent, "Other")
    foreign_event = append(agent, other, "Elsewhere.").json()["event_id"]

    response = append(agent, thread_id, "Fix.", corrects=foreign_event)

    assert response.status_code == 400
    assert response.json()["code"] == "unknown_event"


def test_there_is_no_update_endpoint(agent, thread_id):
    event_id = append(agent, thread_id, "Hello.").json()["event_id"]

    response = agent.put(f"/api/v1/threads/{thread_id}/events/{event_id}", {"text": "Changed"})

    assert response.status_code == 405
    assert ThreadEvent.objects.get(pk=event_id).text == "Hello."


def test_a_read_only_key_cannot_append(make_agent, tenant, agent, thread_id):
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    response = append(reader, thread_id, "Hello.")

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert reader.get(f"/api/v1/threads/{thread_id}/events").status_code == 200


def test_deleting_an_event_blanks_it_in_place_and_keeps_its_seq(agent, thread_id):
    append(agent, thread_id, "First.")
    doomed = append(agent, thread_id, "My new address is 12 Baker Street.", key="k-addr").json()
    append(agent, thread_id, "Third.")

    response = agent.delete(f"/api/v1/threads/{thread_id}/events/{doomed['event_id']}")

    assert response.status_code == 200
    assert response.json()["status"] == "deleted"
    assert response.json()["text"] == ""
    events = agent.get(f"/api/v1/threads/{thread_id}/events").json()["results"]
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert events[1]["status"] == "deleted" and events[1]["text"] == "" and events[1]["data"] == {}
    assert not ThreadEvent.objects.filter(text__icontains="Baker").exists()
    assert AuditEntry.objects.filter(action="thread_event.delete", object_id=doomed["event_id"]).exists()
    # A replay of the original append cannot resurrect the words.
    replay = append(agent, thread_id, "My new address is 12 Baker Street.", key="k-addr")
    assert replay.status_code == 200 and replay.json()["text"] == ""
    # Deleting again is a no-op.
    assert agent.delete(f"/api/v1/threads/{thread_id}/events/{doomed['event_id']}").status_code == 200


def test_a_memory_write_citing_a_deleted_thread_event_is_refused(agent, thread_id):
    event_id = append(agent, thread_id, "I always take the aisle seat.").json()["event_id"]
    agent.delete(f"/api/v1/threads/{thread_id}/events/{event_id}")

    body = memory_body(source={"type": "explicit_user_statement", "event_id": event_id})
    response = agent.post("/api/v1/memories", body)

    assert response.status_code == 409
    assert response.json()["code"] == "tombstoned"


def test_reading_a_page_of_events_takes_two_queries_whatever_its_size(agent, thread_id, django_assert_num_queries):
    from memory.threads.selectors import thread_events
    from tests.threads.conftest import agent_scope

    for n in range(30):
        append(agent, thread_id, f"message {n}")

    with django_assert_num_queries(2):  # the thread (scope check), then the page
        assert len(thread_events(scope=agent_scope(agent), thread_id=thread_id, limit=25)) == 25


@pytest.mark.parametrize("key", ["   ", "k" * 201])
def test_an_unusable_idempotency_key_is_400(agent, thread_id, key):
    response = append(agent, thread_id, "Hello.", key=key)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_idempotency_key"
    assert ThreadEvent.objects.count() == 0
