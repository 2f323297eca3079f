"""Run failed deletion jobs again now.

Why a command: a job ends ``failed`` only after its automatic retries are spent (a surface down for longer than
the backoff, a bug fixed since); once the cause is gone an operator runs it again without waiting for the person
to ask twice. A job resumes at its first step that is not done. Jobs waiting for an automatic retry may be named
too (they run at once). ``--dry-run`` lists what would be retried.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.deletion.models import DeletionJob
from memory.deletion.services import deletion_retry
from memory.errors import NotFound


class Command(BaseCommand):
    help = "Re-queue failed deletion jobs: `deletion_retry <job id> ...` or `deletion_retry --all-failed`."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("job_ids", nargs="*", help="Deletion job ids (del_...).")
        parser.add_argument("--all-failed", action="store_true", help="Every job that ended failed.")
        parser.add_argument("--dry-run", action="store_true", help="List the jobs; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        ids = list(options["job_ids"])
        if options["all_failed"]:
            ids += list(DeletionJob.objects.filter(status=DeletionJob.Status.FAILED).order_by("created_at")
                        .values_list("pk", flat=True))
        if not ids:
            raise CommandError("Name job ids or pass --all-failed.")
        for job_id in dict.fromkeys(ids):
            if options["dry_run"]:
                job = DeletionJob.objects.filter(pk=job_id).first()
                self.stdout.write(f"{job_id}: {job.status if job else 'missing'} (would retry)")
                continue
            try:
                job = deletion_retry(job_id=job_id, actor="system:deletion_retry")
            except NotFound as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"{job_id}: {job.status}")
