"""django-q2 entry points of the deletion area: ids in, one service call, safe to run twice."""

from __future__ import annotations

from memory.deletion.models import DeletionJob
from memory.deletion.retention import purge_expired as sweep
from memory.deletion.services import deletion_run
from memory.queues import URGENT, enqueue


def run_deletion(job_id: str) -> str:
    return deletion_run(job_id=job_id)


def purge_expired() -> dict[str, int]:
    """The scheduled TTL / retention sweep (Schedule 'engram.purge_expired', hourly)."""
    return sweep(dry_run=False).as_dict()


def sweep_deletions(stale_seconds: int = 60) -> int:
    """Re-queue deletion jobs pending or running with no progress for ``stale_seconds`` (a queue insert that
    failed after the commit, a worker lost before its lease ran out) and jobs whose automatic retry is due;
    the engram.sweep_deletions schedule runs it every minute on the urgent queue. Running a job twice is
    safe: it resumes, or finds it busy."""
    from datetime import timedelta

    from django.db.models import Q
    from django.utils import timezone

    now = timezone.now()
    stale = now - timedelta(seconds=stale_seconds)
    waiting = DeletionJob.objects.filter(status__in=[DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING])
    # A job waiting for its automatic retry (retry_at) runs once that time has come, not before.
    ids = list(waiting.filter(Q(retry_at__isnull=True, updated_at__lt=stale) | Q(retry_at__lte=now))
               .values_list("pk", flat=True)[:500])
    for job_id in ids:
        enqueue("memory.deletion.tasks.run_deletion", job_id, queue=URGENT)
    return len(ids)
