"""End to end through a real `manage.py qcluster`: submitting a candidate consolidates it in the worker."""

from __future__ import annotations

import pytest
from django_q.tasks import async_task

from memory.models import AuditEntry, Candidate
from tests.conftest import wait_for
from tests.consolidation.helpers import submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def settled(*ids: str) -> bool:
    return not Candidate.objects.filter(pk__in=ids, status="pending").exists()


def test_a_real_worker_consolidates_merges_and_ignores_a_redelivered_task(agent, qcluster):
    first = submit(agent, event_id="evt_a", said="I hate being stuck at the window.")
    wait_for(lambda: settled(first.pk), timeout=90)  # the first task also loads the model
    second = submit(agent, value="Aisle", text="Likes aisle seats", event_id="evt_b")
    wait_for(lambda: settled(second.pk), timeout=30)

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "review" and [r["code"] for r in first.reasons] == ["no_active_record"]
    assert second.status == "merged" and second.merged_into_id == first.pk
    assert [e["event_id"] for e in first.evidence] == ["evt_a", "evt_b"]

    # django-q2 re-delivers a task whose retry time ran out: the same task again writes nothing.
    audits = AuditEntry.objects.count()
    async_task("memory.consolidation.tasks.consolidate_candidate", second.pk, task_name="redelivery-1")
    async_task("memory.consolidation.tasks.consolidate_candidate", first.pk, task_name="redelivery-2")
    from django_q.models import Success

    wait_for(lambda: Success.objects.filter(name__startswith="redelivery-").count() == 2, timeout=30)
    assert sorted(Success.objects.filter(name__startswith="redelivery-").values_list("result", flat=True)) == [
        "merged", "review"]
    assert AuditEntry.objects.count() == audits
    first.refresh_from_db()
    assert [e["event_id"] for e in first.evidence] == ["evt_a", "evt_b"]
    assert qcluster.poll() is None
