"""POST /api/v1/retrieve with include ["summaries"]: fresh summaries come back as packets with their range."""

from __future__ import annotations

import pytest

from tests.threads.conftest import append, new_thread

pytestmark = pytest.mark.django_db


def test_retrieve_returns_fresh_summaries_in_scope_and_drops_stale_ones(agent, outsider, foreign_agent):
    thread_id = new_thread(agent)
    append(agent, thread_id, "I need a flight to Lisbon in May.")
    doomed = append(agent, thread_id, "The Lisbon trip is a surprise for Ana.").json()["event_id"]
    summary = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    body = {"query": "Lisbon trip", "include": ["summaries"], "budget_tokens": 400}

    response = agent.post("/api/v1/retrieve", body)

    assert response.status_code == 200, response.json()
    packets = [p for p in response.json()["packets"] if p.get("kind") == "summary"]
    assert [p["summary_id"] for p in packets] == [summary["summary_id"]]
    assert packets[0]["source_range"] == {"from_seq": 1, "to_seq": 2}
    assert packets[0]["thread_id"] == thread_id and packets[0]["status"] == "fresh"
    assert outsider.post("/api/v1/retrieve", body).json()["packets"] == []  # another subject
    assert foreign_agent.post("/api/v1/retrieve", body).json()["packets"] == []  # another tenant

    agent.delete(f"/api/v1/threads/{thread_id}/events/{doomed}")
    after = agent.post("/api/v1/retrieve", body).json()["packets"]
    assert all(p.get("summary_id") != summary["summary_id"] for p in after)
    assert "Ana" not in str(after)
