"""Retrieval fixtures: records written through the API, embeddings filled by the real task (run
synchronously), on the real model and database."""

from __future__ import annotations

from typing import Any

import pytest
from django_q.conf import Conf

from tests.conftest import memory_body

RETRIEVE = "/api/v1/retrieve"


@pytest.fixture
def sync_tasks(monkeypatch: Any) -> None:
    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def remember(sync_tasks: Any, django_capture_on_commit_callbacks: Any) -> Any:
    """remember(agent, text, field=..., value=..., namespace=..., embed=True, **overrides) -> memory_id.

    Writes through POST /api/v1/memories; with embed=True the on-commit embedding task runs (sync)."""
    counter = {"n": 0}

    def write(agent: Any, text: str, *, field: str | None = None, value: Any = None,
              namespace: list[str] | None = None, embed: bool = True, path: str = "/api/v1/memories",
              **overrides: Any) -> str:
        counter["n"] += 1
        n = counter["n"]
        body = memory_body(
            namespace=namespace or ["user", "profile"], kind=overrides.pop("kind", "preference"),
            fact={"field": field or f"fact_{n}", "value": value if value is not None else text},
            text=text, source={"type": overrides.pop("source_type", "explicit_user_statement"),
                               "event_id": f"evt_{agent.subject.external_id}_{n}"},
            **overrides,
        )
        with django_capture_on_commit_callbacks(execute=embed):
            response = agent.post(path, body)
        assert response.status_code == 201, response.json()
        return response.json()["memory_id"]

    return write


def retrieve(agent: Any, query: str, **body: Any) -> Any:
    response = agent.post(RETRIEVE, {"query": query, **body})
    assert response.status_code == 200, response.json()
    return response.json()
