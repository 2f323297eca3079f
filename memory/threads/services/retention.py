"""Thread-state retention, separate from long-term memory's classes: idle thread state is dropped.

A thread (with its events and summaries) whose last append is older than
ENGRAM_THREAD_RETENTION_DAYS, and a checkpoint or tool call not written for as long, are deleted
in one bulk query each. 0 keeps thread state forever. Long-term memory written from a thread is not
touched: it lives under its own class's TTL and retention.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.audit import audit
from memory.threads.models import Checkpoint, Thread, ToolCall


@dataclass
class ThreadSweep:
    threads: int = 0
    checkpoints: int = 0
    tool_calls: int = 0


def retention_period() -> dt.timedelta | None:
    days = int(settings.ENGRAM_THREAD_RETENTION_DAYS)
    return dt.timedelta(days=days) if days > 0 else None


@transaction.atomic
def threads_purge_inactive(*, older_than: dt.timedelta | None = None, dry_run: bool = False) -> ThreadSweep:
    period = older_than if older_than is not None else retention_period()
    if period is None:
        return ThreadSweep()
    cutoff = timezone.now() - period
    threads = Thread.objects.filter(updated_at__lt=cutoff)
    checkpoints = Checkpoint.objects.filter(updated_at__lt=cutoff)
    calls = ToolCall.objects.filter(updated_at__lt=cutoff)
    if dry_run:
        return ThreadSweep(threads=threads.count(), checkpoints=checkpoints.count(), tool_calls=calls.count())
    thread_ids = list(threads.values_list("pk", flat=True))
    sweep = ThreadSweep(threads=len(thread_ids))
    Thread.objects.filter(pk__in=thread_ids).delete()  # cascades to events and summaries
    sweep.checkpoints, _ = checkpoints.delete()
    sweep.tool_calls, _ = calls.delete()
    if thread_ids or sweep.checkpoints or sweep.tool_calls:
        audit(actor="system", action="threads.retention", object_type="threads", object_id="sweep", tenant_id=None,
              data={"threads": thread_ids[:1000], "checkpoints": sweep.checkpoints, "tool_calls": sweep.tool_calls,
                    "cutoff": cutoff.isoformat()})
    return sweep
