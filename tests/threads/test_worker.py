"""End to end through a real `manage.py qcluster`: deleting an event regenerates the summary over it."""

from __future__ import annotations

import pytest

from memory.threads.models import Summary
from tests.conftest import wait_for
from tests.threads.conftest import append, new_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_real_worker_regenerates_a_stale_summary_without_the_deleted_text(agent, qcluster):
    thread_id = new_thread(agent)
    append(agent, thread_id, "Book a table for two on Friday.")
    doomed = append(agent, thread_id, "It's for my anniversary with Ana, keep it secret.").json()["event_id"]
    append(agent, thread_id, "Table booked at 8pm.", role="assistant")
    summary = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    assert "Ana" in summary["text"]

    deleted = agent.delete(f"/api/v1/threads/{thread_id}/events/{doomed}")

    assert deleted.json()["stale_summaries"] == [summary["summary_id"]]
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").status_code == 404  # stale at once
    fresh = wait_for(lambda: Summary.objects.filter(thread_id=thread_id, status="fresh").first(), timeout=60)
    assert fresh.regenerates_id == summary["summary_id"]
    assert "Table booked at 8pm." in fresh.text
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").json()["summary_id"] == fresh.pk
    for row in Summary.objects.all():
        assert "Ana" not in row.text and "anniversary" not in row.text
    assert qcluster.poll() is None  # the worker is still up: the task did not crash it
