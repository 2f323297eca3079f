"""Deletion is bulk queries: its cost does not grow with the subject's other memories."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import memory_body
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db


def _subject_with(agent, others: int) -> str:
    for i in range(others):
        agent.post("/api/v1/memories", memory_body(
            fact={"field": f"pref_{i}", "value": f"value {i}"}, text=f"Other preference {i}",
            source={"type": "explicit_user_statement", "event_id": f"evt_other_{i}"}))
    return agent.post("/api/v1/memories", memory_body()).json()["memory_id"]


def _queries_to_delete(agent, memory_id: str) -> tuple[int, float]:
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        assert run_job(job_id) == "completed"
        elapsed = time.perf_counter() - started
    return len(queries), elapsed


def test_the_query_count_of_a_deletion_is_independent_of_the_subjects_size(make_agent, tenant):
    warm, small, large = (make_agent(tenant, name) for name in ("usr_warm", "usr_small", "usr_large"))
    _queries_to_delete(warm, _subject_with(warm, 0))  # loads the model, fills per-process caches

    few, _ = _queries_to_delete(small, _subject_with(small, 1))
    many, elapsed = _queries_to_delete(large, _subject_with(large, 40))

    assert many == few, (few, many)
    assert elapsed < 5
