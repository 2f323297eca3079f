"""Twin deliveries of one task running at the same time write once (row lock + compare-and-set)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory.consolidation import consolidate
from memory.models import AuditEntry, Candidate, MemoryRecord
from tests.consolidation.helpers import INFERRED, submit

pytestmark = pytest.mark.django_db(transaction=True)


def run_together(*calls):
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(index, fn):
        try:
            barrier.wait()
            results[index] = fn()
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_two_deliveries_at_once_create_one_retrievable_record(agent):
    candidate = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian")

    results = run_together(lambda: consolidate(candidate.pk), lambda: consolidate(candidate.pk))

    assert results == ["retrievable", "retrievable"]
    assert MemoryRecord.objects.filter(confidence="candidate").count() == 1
    assert AuditEntry.objects.filter(action="candidate.consolidate", object_id=candidate.pk).count() == 1


def test_two_near_duplicates_in_different_fields_at_once_end_as_one_item(agent):
    a = submit(agent, field="seat", value="aisle", text="Prefers aisle seats", event_id="evt_a")
    b = submit(agent, field="seat_preference", value="aisle seat", text="Prefers an aisle seat", event_id="evt_b")

    results = run_together(lambda: consolidate(a.pk), lambda: consolidate(b.pk))

    assert sorted(results) == ["merged", "review"]
    kept = Candidate.objects.get(status="review")
    assert sorted(e["event_id"] for e in kept.evidence) == ["evt_a", "evt_b"]
