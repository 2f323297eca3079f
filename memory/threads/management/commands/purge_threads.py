"""Delete idle thread state: threads (with events and summaries), checkpoints and tool calls.

Why a command as well as the daily schedule ("engram.purge_inactive_threads", threads migration
0002): operators run it after lowering ENGRAM_THREAD_RETENTION_DAYS, and ``--dry-run`` shows what
would go first. Each kind goes in one bulk delete inside one transaction.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from rich.progress import Progress, SpinnerColumn, TextColumn

from memory.threads.services.retention import retention_period, threads_purge_inactive


class Command(BaseCommand):
    help = "Delete thread state idle for longer than ENGRAM_THREAD_RETENTION_DAYS (or --days)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count what would go; delete nothing.")
        parser.add_argument("--days", type=int, help="Override the retention period, in days.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options.get("days")
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1.")
        period = dt.timedelta(days=days) if days else retention_period()
        if period is None:
            self.stdout.write("Thread retention is off (ENGRAM_THREAD_RETENTION_DAYS=0); nothing to do.")
            return
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True) as progress:
            progress.add_task("sweeping idle thread state", total=None)
            sweep = threads_purge_inactive(older_than=period, dry_run=options["dry_run"])
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(f"{verb} {sweep.threads} thread(s), {sweep.checkpoints} checkpoint(s), "
                          f"{sweep.tool_calls} tool call(s) idle for more than {period.days} day(s)")
