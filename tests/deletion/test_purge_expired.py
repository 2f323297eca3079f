"""purge_expired: TTL expiry flips status; maximum retention deletes through the deletion job."""

from __future__ import annotations

from datetime import timedelta
from importlib import import_module
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from memory.deletion.models import DeletionJob
from memory.models import AuditEntry, MemoryRecord
from tests.conftest import memory_body
from tests.deletion.helpers import run_job, tables_containing

pytestmark = pytest.mark.django_db


def _episode(agent, days_ago: int, event_id: str) -> str:
    start = timezone.now() - timedelta(days=days_ago)
    response = agent.post("/api/v1/memories", memory_body(
        namespace=["episodes"], kind="episode", fact={"field": f"trip_{event_id}", "value": "Lisbon"},
        text=f"Went to Lisbon {event_id}", valid_from=start.isoformat(),
        source={"type": "explicit_user_statement", "event_id": event_id}))
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]


def _purge(*args: str) -> str:
    out = StringIO()
    call_command("purge_expired", *args, stdout=out)
    return out.getvalue()


def test_it_expires_records_past_their_ttl(agent):
    old = _episode(agent, 100, "evt_old")  # episodes: 90-day default TTL
    fresh = _episode(agent, 1, "evt_new")

    output = _purge()

    assert "expired 1 record(s)" in output
    assert MemoryRecord.objects.get(pk=old).status == "expired"
    assert MemoryRecord.objects.get(pk=fresh).status == "active"
    assert MemoryRecord.objects.get(pk=old).text == "Went to Lisbon evt_old"  # content stays until retention


def test_dry_run_changes_nothing(agent):
    old = _episode(agent, 100, "evt_old")
    MemoryRecord.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(days=400))

    output = _purge("--dry-run")

    assert "would expire 1 record(s); past retention: 1 record(s)" in output
    assert MemoryRecord.objects.get(pk=old).status == "active"
    assert not DeletionJob.objects.exists()


def test_it_deletes_records_past_maximum_retention_through_a_deletion_job(agent):
    keep = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    old = agent.post("/api/v1/memories", memory_body(
        fact={"field": "meal_preference", "value": "vegetarian retention"}, text="Vegetarian retention meals",
        source={"type": "explicit_user_statement", "event_id": "evt_meal"})).json()["memory_id"]
    # travel_preferences keeps records 730 days; this one was written 731 days ago.
    MemoryRecord.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(days=731))

    output = _purge()

    assert "past retention: 1 record(s) in 1 deletion job(s)" in output
    job = DeletionJob.objects.get(kind="retention")
    assert job.plan["memory_ids"] == [old]
    assert run_job(job.pk) == "completed"
    assert MemoryRecord.objects.get(pk=old).status == "deleted"
    assert MemoryRecord.objects.get(pk=keep).status == "active"
    assert tables_containing("vegetarian retention") == []
    _purge()  # a second sweep plans nothing new
    assert DeletionJob.objects.count() == 1


def test_the_migration_schedules_the_sweep_hourly():
    # A live-server test's flush may have emptied the table in this process: the migration's own step is run.
    import_module("memory.deletion.migrations.0002_purge_expired_schedule").create_schedule(apps, None)
    schedule = Schedule.objects.get(name="engram.purge_expired")

    assert schedule.func == "memory.deletion.tasks.purge_expired"
    assert schedule.schedule_type == Schedule.HOURLY and schedule.repeats == -1


def test_the_scheduled_task_runs_the_same_sweep(agent):
    from memory.deletion.tasks import purge_expired

    old = _episode(agent, 100, "evt_old")

    assert purge_expired()["expired"] == 1
    assert MemoryRecord.objects.get(pk=old).status == "expired"


def test_each_tenant_gets_its_own_audit_row_of_an_expiry(agent, foreign_agent):
    """Audit rows belong to a tenant (a tenant's reviewers read them; the table is distributed by tenant), so a
    sweep across tenants writes one row per tenant, naming only that tenant's records."""
    ours = _episode(agent, 100, "evt_ours")
    theirs = _episode(foreign_agent, 100, "evt_theirs")

    _purge()

    rows = {(a.tenant_id, tuple(a.data["memory_ids"])) for a in AuditEntry.objects.filter(action="memory.expire")}
    assert rows == {(agent.tenant.pk, (ours,)), (foreign_agent.tenant.pk, (theirs,))}
