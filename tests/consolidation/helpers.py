"""Submitting candidates the way an agent does: POST /api/v1/candidates."""

from __future__ import annotations

from typing import Any

from memory.models import Candidate

INFERRED = ["user", "inferred"]  # class user_inferred: propose, candidates retrievable
TRAVEL = ["user", "travel_preferences"]  # class travel_preferences: write, not retrievable


def candidate_body(field: str = "seat_preference", value: Any = "aisle", text: str = "Prefers aisle seats",
                   event_id: str = "evt_c1", namespace: list[str] | None = None, said: str = "",
                   evidence: list[dict[str, Any]] | None = None, kind: str = "preference") -> dict[str, Any]:
    body: dict[str, Any] = {
        "namespace": namespace or TRAVEL, "kind": kind, "fact": {"field": field, "value": value}, "text": text,
        "source": {"type": "model_inferred", "event_id": event_id,
                   "text": said or f"(chat) something implying: {text}"},
    }
    if evidence is not None:
        body["evidence"] = evidence
    return body


def submit(agent: Any, **kwargs: Any) -> Candidate:
    response = agent.post("/api/v1/candidates", candidate_body(**kwargs))
    assert response.status_code in (200, 202), response.json()
    return Candidate.objects.get(pk=response.json()["candidate_id"])


def state(agent: Any, **kwargs: Any) -> str:
    """An explicit user statement through POST /api/v1/memories; returns the memory id."""
    body = candidate_body(**kwargs)
    body["source"]["type"] = "explicit_user_statement"
    response = agent.post("/api/v1/memories", body)
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]
