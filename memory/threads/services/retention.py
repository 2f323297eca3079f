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
    # One tenant at a time: each tenant's audit row names its own threads and counts (audit rows belong to a
    # tenant), and on a database sharded by tenant each statement stays on one node.
    tenants = sorted({*threads.values_list("tenant_id", flat=True), *checkpoints.values_list("tenant_id", flat=True),
                      *calls.values_list("tenant_id", flat=True)})
    sweep = ThreadSweep()
    for tenant_id in tenants:
        thread_ids = list(threads.filter(tenant_id=tenant_id).values_list("pk", flat=True))
        Thread.objects.filter(tenant_id=tenant_id, pk__in=thread_ids).delete()  # cascades to events and summaries
        removed_checkpoints, _ = checkpoints.filter(tenant_id=tenant_id).delete()
        removed_calls, _ = calls.filter(tenant_id=tenant_id).delete()
        sweep.threads += len(thread_ids)
        sweep.checkpoints += removed_checkpoints
        sweep.tool_calls += removed_calls
        audit(actor="system", action="threads.retention", object_type="threads", object_id="sweep",
              tenant_id=tenant_id, data={"threads": thread_ids[:1000], "checkpoints": removed_checkpoints,
                                         "tool_calls": removed_calls, "cutoff": cutoff.isoformat()})
    return sweep
