"""Expire records past their TTL and delete records past their class's maximum retention.

Why a command as well as the hourly schedule (django-q2 Schedule "engram.purge_expired", created by
the deletion app's migration 0002): operators run it after changing a class's retention, and
``--dry-run`` shows what would go first. Deletions go through the same tracked deletion jobs as a
user's DELETE (every surface, tombstones, verification); this command queues them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.management.base import BaseCommand
from rich.progress import track as rich_track

from memory.deletion.retention import purge_expired


class Command(BaseCommand):
    help = "Expire records past their TTL; delete records past maximum retention (through deletion jobs)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count what would change; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        def track(items: Iterable, label: str) -> Iterable:
            return rich_track(items, description=label, console=None, transient=True)

        result = purge_expired(dry_run=options["dry_run"], track=track)
        prefix = "would expire" if options["dry_run"] else "expired"
        self.stdout.write(f"{prefix} {result.expired} record(s); past retention: {result.past_retention} record(s)"
                          + ("" if options["dry_run"] else f" in {len(result.jobs)} deletion job(s); "
                             f"dropped {result.tombstones_dropped} expired tombstone(s), "
                             f"{result.logs_dropped} expired retrieval log(s)"))
