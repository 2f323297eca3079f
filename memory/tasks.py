"""django-q2 task entry points, and the queue each kind of work runs on.

Every task is enqueued through ``enqueue`` with its queue named (Q_CLUSTER in config/settings.py): a
deletion must never wait behind a 10,000-record import's embeddings, and one record's embedding should
not either. Each entry point takes ids, calls a service, and is safe to run twice.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("engram.tasks")

URGENT = "urgent"  # deletion and erasure jobs
INTERACTIVE = "engram"  # short work a user waits on (the default queue; Q_CLUSTER["name"])
BULK = "bulk"  # batch embeddings, document embeddings
QUEUES = (URGENT, INTERACTIVE, BULK)


def enqueue(func: str, *args: Any, queue: str) -> str | None:
    """Queue ``func(*args)`` on ``queue``; called on commit, so the work it stands for is already durable.

    The queue is named on every call: a task enqueued without a cluster goes to the enqueuing process's own
    queue, which inside a worker is the wrong one. If the broker cannot take the task (the database went
    away between the commit and this insert), the write has still happened and must not be reported as
    failed: the error is logged and the sweeps below pick the work up."""
    from django_q.tasks import async_task

    if queue not in QUEUES:
        raise ValueError(f"unknown queue {queue!r}")
    try:
        return str(async_task(func, *args, cluster=queue))
    except Exception:  # noqa: BLE001 - the work is durable; a sweep re-queues it
        logger.warning("could not queue %s on %s; the sweep will pick it up", func, queue, exc_info=True)
        return None


def sweep_deletions(stale_seconds: int = 60) -> int:
    """Re-queue deletion jobs pending or running with no progress for ``stale_seconds`` (a queue insert that
    failed, a worker lost before its lease). Returns how many were queued."""
    from datetime import timedelta

    from django.utils import timezone

    from memory.deletion.models import DeletionJob

    stale = timezone.now() - timedelta(seconds=stale_seconds)
    ids = list(DeletionJob.objects.filter(status__in=[DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING],
                                          updated_at__lt=stale).values_list("pk", flat=True)[:500])
    for job_id in ids:
        enqueue("memory.deletion.tasks.run_deletion", job_id, queue=URGENT)
    return len(ids)


def embed_pending(limit: int = 20_000) -> int:
    """Embed active records still without an embedding (a lost task, or the model was down)."""
    from memory.retrieval.embedding import embed_record_ids, pending_ids

    return embed_record_ids(pending_ids()[:limit])


def embed_records(record_ids: list[str]) -> int:
    """Fill the derived embedding of records."""
    from memory.retrieval.embedding import embed_record_ids

    return embed_record_ids(record_ids)


def consolidate_candidate(candidate_id: str) -> str:
    """Consolidate one pending candidate (consolidation issue owns the logic)."""
    from memory.consolidation import consolidate

    return consolidate(candidate_id)
