"""django-q2 entry points of the deletion area: ids in, one service call, safe to run twice."""

from __future__ import annotations


def run_deletion(job_id: str) -> str:
    from memory.deletion.services import deletion_run

    return deletion_run(job_id=job_id)


def purge_expired() -> dict[str, int]:
    """The scheduled TTL / retention sweep (Schedule 'engram.purge_expired', hourly)."""
    from memory.deletion.retention import purge_expired as sweep

    return sweep(dry_run=False).as_dict()
