"""django-q2 task entry points, and the queue each kind of work runs on.

Every task is enqueued through ``enqueue`` with its queue named (Q_CLUSTER in config/settings.py): a
deletion must never wait behind a 10,000-record import's embeddings, and one record's embedding should
not either. Each entry point takes ids, calls a service, and is safe to run twice.
"""

from __future__ import annotations

from typing import Any

URGENT = "urgent"  # deletion and erasure jobs
INTERACTIVE = "engram"  # short work a user waits on (the default queue; Q_CLUSTER["name"])
BULK = "bulk"  # batch embeddings, document embeddings
QUEUES = (URGENT, INTERACTIVE, BULK)


def enqueue(func: str, *args: Any, queue: str) -> str:
    """Queue ``func(*args)`` on ``queue``. Named explicitly on every call: a task enqueued without a
    cluster goes to the enqueuing process's own queue, which inside a worker is the wrong one."""
    from django_q.tasks import async_task

    if queue not in QUEUES:
        raise ValueError(f"unknown queue {queue!r}")
    return str(async_task(func, *args, cluster=queue))


def embed_records(record_ids: list[str]) -> int:
    """Fill the derived embedding of records."""
    from memory.retrieval.embedding import embed_record_ids

    return embed_record_ids(record_ids)


def consolidate_candidate(candidate_id: str) -> str:
    """Consolidate one pending candidate (consolidation issue owns the logic)."""
    from memory.consolidation import consolidate

    return consolidate(candidate_id)
