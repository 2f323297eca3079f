"""Idempotency and precedence hold under concurrent requests (real threads, real transactions)."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, transaction
from prometheus_client import REGISTRY

from memory.db.retry import retried_on_deadlock
from memory.identity.services import tenant_create
from memory.models import Event, MemoryRecord, Tenant
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db(transaction=True)


def run_concurrently(n, fn):
    barrier = threading.Barrier(n)
    results = [None] * n

    def worker(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_20_concurrent_identical_writes_make_one_record(agent):
    statuses = run_concurrently(20, lambda i: agent.post("/api/v1/memories", memory_body()).status_code)

    assert sorted(statuses) == [200] * 19 + [201]
    assert MemoryRecord.objects.count() == 1
    assert Event.objects.count() == 1


def test_20_concurrent_statements_for_one_field_leave_exactly_one_active_head(agent):
    def write(i):
        return agent.post("/api/v1/memories", memory_body(fact={"field": "seat_preference", "value": f"v{i}"},
                                                          source={"event_id": f"evt_{i}"})).status_code

    statuses = run_concurrently(20, write)

    assert statuses == [201] * 20
    assert MemoryRecord.objects.filter(status="active").count() == 1
    # The chain is linear: every superseded record points at exactly one successor.
    superseded = MemoryRecord.objects.filter(status="superseded")
    assert superseded.count() == 19
    assert superseded.values("superseded_by").distinct().count() == 19


@pytest.mark.parametrize("order", ["same", "reversed"])
def test_two_concurrent_batches_with_the_same_event_ids_make_one_record_each(agent, order):
    items = [memory_body(fact={"field": f"pref_{n}", "value": f"v{n}"}, source={"event_id": f"evt_{n}"})
             for n in range(50)]
    batches = [items, items if order == "same" else items[::-1]]

    responses = run_concurrently(2, lambda i: agent.post("/api/v1/memories/batch", {"items": batches[i]}))

    assert [r.status_code for r in responses] == [200, 200]
    bodies = [r.json() for r in responses]
    # Each event id is created by one call and answered as a replay by the other.
    assert [sum(b[k] for b in bodies) for k in ("created", "existing", "error")] == [50, 50, 0]
    assert Event.objects.count() == 50
    assert MemoryRecord.objects.count() == 50
    # Both answers name the same record for each event id.
    by_event = [{r["record"]["source"]["event_id"]: r["memory_id"] for r in b["results"]} for b in bodies]
    assert by_event[0] == by_event[1]


def _opposite_lockers(first, second, *, outer: bool):
    """Two transactions that update two tenants' rows in opposite orders, both holding their first row before
    either asks for its second: PostgreSQL aborts one of them as a deadlock's victim."""
    barrier = threading.Barrier(2)
    runs: list[str] = []

    @retried_on_deadlock
    @transaction.atomic
    def update(name, a, b):
        runs.append(name)
        Tenant.objects.filter(pk=a.pk).update(name=name)
        if len(runs) <= 2:
            barrier.wait(timeout=10)
        Tenant.objects.filter(pk=b.pk).update(name=name)

    def call(i):
        name, a, b = ("one", first, second) if i == 0 else ("two", second, first)
        try:
            if outer:
                with transaction.atomic():
                    update(name, a, b)
            else:
                update(name, a, b)
            return "done"
        except OperationalError as exc:
            return type(exc.__cause__).__name__

    return run_concurrently(2, call), runs


def test_a_deadlock_victim_is_run_again_and_both_writers_finish():
    first, second = tenant_create(slug="dl-first"), tenant_create(slug="dl-second")
    retried = REGISTRY.get_sample_value("engram_deadlock_retries_total", {"operation": "update"}) or 0.0

    outcomes, runs = _opposite_lockers(first, second, outer=False)

    assert outcomes == ["done", "done"]
    assert len(runs) == 3  # the victim ran once more, after the survivor committed
    assert REGISTRY.get_sample_value("engram_deadlock_retries_total", {"operation": "update"}) == retried + 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.name == second.name == runs[-1]  # the one run last wrote both rows


def test_inside_a_callers_transaction_the_victim_is_not_run_again():
    first, second = tenant_create(slug="dl-first"), tenant_create(slug="dl-second")

    outcomes, runs = _opposite_lockers(first, second, outer=True)

    assert sorted(outcomes) == ["DeadlockDetected", "done"]
    assert len(runs) == 2
