"""Thread-state retention: idle threads, checkpoints and tool calls go; recent ones and long-term memory stay."""

from __future__ import annotations

import datetime as dt
from importlib import import_module

import pytest
from django.apps import apps
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from memory.models import AuditEntry, MemoryRecord
from memory.threads.models import Checkpoint, Summary, Thread, ThreadEvent, ToolCall
from tests.conftest import memory_body
from tests.threads.conftest import append, new_thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def state(agent):
    old = new_thread(agent, "old")
    event_id = append(agent, old, "Old words.").json()["event_id"]
    agent.post(f"/api/v1/threads/{old}/summarize", {})
    recent = new_thread(agent, "recent")
    append(agent, recent, "New words.")
    agent.put("/api/v1/workflows/old-wf/checkpoint", {"current_step": "x"}, headers={"If-None-Match": "*"})
    agent.post("/api/v1/workflows/old-wf/tool-calls", {"idempotency_key": "k", "tool": "t"})
    agent.post("/api/v1/memories", memory_body(source={"type": "explicit_user_statement", "event_id": event_id}))
    long_ago = timezone.now() - dt.timedelta(days=120)
    Thread.objects.filter(pk=old).update(updated_at=long_ago)
    Checkpoint.objects.update(updated_at=long_ago)
    ToolCall.objects.update(updated_at=long_ago)
    return {"old": old, "recent": recent}


def test_dry_run_counts_and_deletes_nothing(state, capsys):
    call_command("purge_threads", "--dry-run")

    assert "would delete 1 thread(s), 1 checkpoint(s), 1 tool call(s)" in capsys.readouterr().out
    assert Thread.objects.count() == 2 and Checkpoint.objects.count() == 1


def test_it_deletes_idle_thread_state_only(state, capsys):
    call_command("purge_threads")

    assert "deleted 1 thread(s), 1 checkpoint(s), 1 tool call(s)" in capsys.readouterr().out
    assert list(Thread.objects.values_list("pk", flat=True)) == [state["recent"]]
    assert not ThreadEvent.objects.filter(thread_id=state["old"]).exists()
    assert not Summary.objects.filter(thread_id=state["old"]).exists()
    assert not Checkpoint.objects.exists() and not ToolCall.objects.exists()
    assert MemoryRecord.objects.count() == 1  # long-term memory has its own retention


def test_days_overrides_the_setting(state):
    call_command("purge_threads", "--days", "365")

    assert Thread.objects.count() == 2


def test_zero_days_keeps_everything(state, settings, capsys):
    settings.ENGRAM_THREAD_RETENTION_DAYS = 0

    call_command("purge_threads")

    assert "retention is off" in capsys.readouterr().out
    assert Thread.objects.count() == 2


def test_the_migration_schedules_the_purge_daily():
    # A live-server test's flush may have emptied the table in this process: the migration's own step is run.
    import_module("memory.threads.migrations.0002_retention_schedule").create_schedule(apps, None)
    schedule = Schedule.objects.get(name="engram.purge_inactive_threads")

    assert schedule.func == "memory.threads.tasks.purge_inactive_threads"
    assert schedule.schedule_type == Schedule.DAILY


def test_each_tenant_gets_its_own_audit_row_of_the_sweep(state, agent, foreign_agent):
    theirs = new_thread(foreign_agent, "theirs")
    Thread.objects.filter(pk=theirs).update(updated_at=timezone.now() - dt.timedelta(days=120))

    call_command("purge_threads")

    rows = {a.tenant_id: a.data for a in AuditEntry.objects.filter(action="threads.retention")}
    assert rows[agent.tenant.pk]["threads"] == [state["old"]]
    assert (rows[agent.tenant.pk]["checkpoints"], rows[agent.tenant.pk]["tool_calls"]) == (1, 1)
    assert rows[foreign_agent.tenant.pk]["threads"] == [theirs]
    assert (rows[foreign_agent.tenant.pk]["checkpoints"], rows[foreign_agent.tenant.pk]["tool_calls"]) == (0, 0)
    assert set(rows) == {agent.tenant.pk, foreign_agent.tenant.pk}
