"""Appends and checkpoint writes racing in real threads, each with its own database connection."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memory.models import AuditEntry
from memory.threads.models import Checkpoint, ThreadEvent, ToolCall
from tests.threads.conftest import append, new_thread

pytestmark = pytest.mark.django_db(transaction=True)
N = 20


def race(n: int, call: Callable[[int], Any]) -> list[Any]:
    """Run call(i) in n threads released together; each closes its own connection."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = call(i)
        except Exception as exc:  # surfaced by the assertions below
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def clients(agent: Any, n: int) -> list[Any]:
    return [dataclasses.replace(agent, client=APIClient()) for _ in range(n)]


def test_twenty_concurrent_appends_with_one_idempotency_key_make_one_event(agent):
    thread_id = new_thread(agent)
    agents = clients(agent, N)

    responses = race(N, lambda i: append(agents[i], thread_id, "Charge the card once.", key="pay-1"))

    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * (N - 1) + [201]
    assert len({r.json()["event_id"] for r in responses}) == 1
    assert ThreadEvent.objects.filter(thread_id=thread_id).count() == 1
    assert ThreadEvent.objects.get(thread_id=thread_id).seq == 1


def test_sequence_numbers_are_gap_free_under_concurrent_appends(agent):
    thread_id = new_thread(agent)
    agents = clients(agent, N)

    responses = race(N, lambda i: append(agents[i], thread_id, f"message {i}", key=f"k-{i}"))

    assert all(r.status_code == 201 for r in responses), [getattr(r, "status_code", r) for r in responses]
    seqs = sorted(ThreadEvent.objects.filter(thread_id=thread_id).values_list("seq", flat=True))
    assert seqs == list(range(1, N + 1))
    assert sorted(r.json()["seq"] for r in responses) == list(range(1, N + 1))


def test_concurrent_checkpoint_writers_with_one_etag_let_exactly_one_through(agent):
    url = "/api/v1/workflows/wf-race/checkpoint"
    created = agent.put(url, {"current_step": "start"}, headers={"If-None-Match": "*"})
    assert created.status_code == 201
    agents = clients(agent, 8)

    responses = race(8, lambda i: agents[i].put(url, {"current_step": f"step-{i}"}, headers={"If-Match": '"1"'}))

    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [412] * 7
    winner = next(r for r in responses if r.status_code == 200).json()["current_step"]
    checkpoint = Checkpoint.objects.get(workflow_id="wf-race")
    assert checkpoint.version == 2 and checkpoint.current_step == winner
    assert AuditEntry.objects.filter(action="checkpoint.put").count() == 2


def test_concurrent_first_checkpoints_create_one(agent):
    url = "/api/v1/workflows/wf-first/checkpoint"
    agents = clients(agent, 6)

    responses = race(6, lambda i: agents[i].put(url, {"current_step": f"s{i}"}, headers={"If-None-Match": "*"}))

    assert sorted(r.status_code for r in responses) == [201] + [412] * 5
    assert Checkpoint.objects.filter(workflow_id="wf-first").count() == 1


def test_twenty_concurrent_records_of_one_tool_call_key_make_one_row(agent):
    agents = clients(agent, N)
    body = {"idempotency_key": "charge-1", "tool": "payments.charge", "arguments": {"amount_eur": 180}}

    responses = race(N, lambda i: agents[i].post("/api/v1/workflows/wf-pay/tool-calls", body))

    assert sorted(getattr(r, "status_code", r) for r in responses) == [200] * (N - 1) + [201]
    assert ToolCall.objects.filter(workflow_id="wf-pay").count() == 1
    assert AuditEntry.objects.filter(action="tool_call.record").count() == 1


def test_replays_and_refused_appends_racing_with_appends_take_no_sequence_number(agent):
    thread_id = new_thread(agent)
    assert append(agent, thread_id, "Original.", key="dup").status_code == 201
    agents = clients(agent, N)

    def call(i: int) -> Any:
        if i % 4 == 0:
            return append(agents[i], thread_id, "Original.", key="dup")  # replay: 200, same event
        if i % 4 == 1:
            return append(agents[i], thread_id, "Something else.", key="dup")  # 409 idempotency_conflict
        return append(agents[i], thread_id, f"message {i}", key=f"k-{i}")

    responses = race(N, call)

    codes = [getattr(r, "status_code", r) for r in responses]
    assert sorted(codes) == sorted([200] * (N // 4) + [409] * (N // 4) + [201] * (N // 2)), codes
    seqs = sorted(ThreadEvent.objects.filter(thread_id=thread_id).values_list("seq", flat=True))
    assert seqs == list(range(1, N // 2 + 2))  # the first event plus one per created append, no holes
