"""Helpers for thread-state tests: threads and events are made through the API, as an agent would."""

from __future__ import annotations

from typing import Any

import pytest


def new_thread(agent: Any, title: str = "Trip planning") -> str:
    response = agent.post("/api/v1/threads", {"title": title})
    assert response.status_code == 201, response.json()
    return response.json()["thread_id"]


def append(agent: Any, thread_id: str, text: str = "", *, kind: str = "message", role: str = "user",
           key: str | None = None, **extra: Any) -> Any:
    body: dict[str, Any] = {"kind": kind, "role": role, "text": text, **extra}
    headers = {"Idempotency-Key": key} if key else None
    return agent.post(f"/api/v1/threads/{thread_id}/events", body, headers=headers)


@pytest.fixture
def thread_id(agent: Any) -> str:
    return new_thread(agent)


def agent_scope(agent: Any) -> Any:
    """The Scope the API would resolve for this agent's key and token (for calling selectors directly)."""
    from memory.scope import Scope

    return Scope(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk, subject_external_id=agent.subject.external_id,
                 permissions=frozenset({"read"}), namespaces=None, actor="test")
