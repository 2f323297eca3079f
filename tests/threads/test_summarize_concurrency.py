"""The summarizer runs outside the thread lock: appends never wait for a slow model, and a deletion that lands
while the model is drafting makes the service draft again, so the deleted words are stored nowhere."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memory.threads.models import Summary
from tests.threads.conftest import append, new_thread
from tests.threads.test_summarizer_adapter import chat  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def in_background(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["response"] = call()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def summarizing(agent, chat, thread_id):  # noqa: F811
    """POST /summarize from another client; returns once the (held) model request has arrived."""
    chat.hold_next = True
    other = dataclasses.replace(agent, client=APIClient())
    thread, result = in_background(lambda: other.post(f"/api/v1/threads/{thread_id}/summarize", {}))
    assert chat.arrived.wait(10), "the summarizer was never called"
    return thread, result


def test_an_append_does_not_wait_for_a_slow_summarizer(agent, chat):  # noqa: F811
    thread_id = new_thread(agent)
    append(agent, thread_id, "Book a table for two on Friday.")
    summarize, result = summarizing(agent, chat, thread_id)

    appender = dataclasses.replace(agent, client=APIClient())
    t, appended = in_background(lambda: append(appender, thread_id, "Make it 8pm."))
    t.join(timeout=5)
    finished_while_the_model_was_busy = not t.is_alive()
    chat.release.set()
    summarize.join(timeout=20)

    assert finished_while_the_model_was_busy
    assert appended["response"].status_code == 201 and appended["response"].json()["seq"] == 2
    assert result["response"].status_code == 201
    assert result["response"].json()["source_range"] == {"from_seq": 1, "to_seq": 1}


def test_a_deletion_while_the_model_drafts_means_drafting_again_without_the_deleted_words(agent, chat):  # noqa: F811
    thread_id = new_thread(agent)
    append(agent, thread_id, "Book a table for two on Friday.")
    doomed = append(agent, thread_id, "It is for my anniversary with Ana, keep it secret.").json()["event_id"]
    append(agent, thread_id, "Table booked at 8pm.", role="assistant")
    summarize, result = summarizing(agent, chat, thread_id)

    deleted = agent.delete(f"/api/v1/threads/{thread_id}/events/{doomed}")  # not blocked by the summarizer
    chat.release.set()  # the model now answers with a draft that still quotes the deleted event
    summarize.join(timeout=20)

    assert deleted.status_code == 200
    assert "Ana" in chat.transcripts()[0] and len(chat.requests) == 2
    assert "Ana" not in chat.transcripts()[1]
    body = result["response"].json()
    assert result["response"].status_code == 201, body
    assert "Table booked at 8pm." in body["text"] and doomed not in body["referenced_event_ids"]
    for row in Summary.objects.all():
        assert "Ana" not in row.text and "anniversary" not in row.text


def test_a_regeneration_drafts_again_when_another_deletion_lands_meanwhile(agent, chat):  # noqa: F811
    from memory.threads.tasks import regenerate_summary

    thread_id = new_thread(agent)
    first = append(agent, thread_id, "Book a table for two on Friday.").json()["event_id"]
    second = append(agent, thread_id, "Ask for the window seat near Ana.").json()["event_id"]
    append(agent, thread_id, "Table booked at 8pm.", role="assistant")
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()["summary_id"]
    agent.delete(f"/api/v1/threads/{thread_id}/events/{first}")  # stale; its regeneration is run by hand below
    chat.hold_next = True
    worker, result = in_background(lambda: regenerate_summary(summary_id))
    assert chat.arrived.wait(10)

    agent.delete(f"/api/v1/threads/{thread_id}/events/{second}")
    chat.release.set()
    worker.join(timeout=20)

    new = Summary.objects.get(pk=result["response"])
    assert new.regenerates_id == summary_id and new.status == "fresh"
    assert "Ana" in chat.transcripts()[-2] and "Ana" not in chat.transcripts()[-1]
    assert "Table booked at 8pm." in new.text and second not in new.referenced_event_ids
    for row in Summary.objects.all():
        assert "Ana" not in row.text
