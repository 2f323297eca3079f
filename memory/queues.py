"""The queue each kind of background work runs on, and the one way to enqueue it.

Every task is enqueued through ``enqueue`` with its queue named (Q_CLUSTER in config/settings.py): a
deletion must never wait behind a 10,000-record import's embeddings, and one record's embedding should
not either. docs/operations.md describes the queues and the workers that serve them.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("engram.tasks")

URGENT = "urgent"  # deletion and erasure jobs
INTERACTIVE = "engram"  # short work a user waits on (the default queue; Q_CLUSTER["name"])
BULK = "bulk"  # batch embeddings, document embeddings
QUEUES = (URGENT, INTERACTIVE, BULK)
# An embedding task for more records than this is an import's: it goes to the bulk queue.
INTERACTIVE_EMBED_MAX = 16


def enqueue(func: str, *args: Any, queue: str) -> str | None:
    """Queue ``func(*args)`` on ``queue``; called on commit, so the work it stands for is already durable.

    The queue is named on every call: a task enqueued without a cluster goes to the enqueuing process's own
    queue, which inside a worker is the wrong one. If the broker cannot take the task (the database went
    away between the commit and this insert), the write has still happened and must not be reported as
    failed: the error is logged and the sweeps (engram.sweep_deletions, engram.embed_pending) pick the work up.
    """
    from django_q.tasks import async_task

    if queue not in QUEUES:
        raise ValueError(f"unknown queue {queue!r}")
    try:
        return str(async_task(func, *args, cluster=queue))
    except Exception:  # noqa: BLE001 - the work is durable; a sweep re-queues it
        logger.warning("could not queue %s on %s; the sweep will pick it up", func, queue, exc_info=True)
        return None


def embedding_queue(count: int) -> str:
    return INTERACTIVE if count <= INTERACTIVE_EMBED_MAX else BULK
