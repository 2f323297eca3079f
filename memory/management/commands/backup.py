"""Back up the configured database (embedded or DATABASE_URL) to one pg_dump archive, with progress.

    manage.py backup                      # var/backups/engram-<UTC time>.dump (ENGRAM_BACKUP_DIR)
    manage.py backup --output /srv/backups/engram.dump

The archive holds every table but the two caches' rows (see memory/backup.py). It is a consistent
snapshot taken while the service keeps running. The deletion journal (ENGRAM_DELETION_JOURNAL) is not
in it, on purpose: it lives beside the database, and `manage.py restore` re-applies the deletions asked
for after the snapshot from it. Back up the journal directory with the archives, never instead of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from memory import backup
from memory.management import progress_bar


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", "-o", help="archive path (default: ENGRAM_BACKUP_DIR/engram-<time>.dump)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, cron)")

    def handle(self, *args: Any, **options: Any) -> None:
        default = Path(settings.ENGRAM_BACKUP_DIR) / f"engram-{timezone.now():%Y%m%dT%H%M%SZ}.dump"
        path = Path(options["output"] or default)
        total = backup.table_count()
        try:
            with progress_bar(disable=options["no_progress"]) as progress:
                task = progress.add_task(f"backing up {backup.target().dbname}", total=total)
                backup.backup(path, advance=lambda n: progress.advance(task, n))
                progress.update(task, completed=total)
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"backup written: {path} ({path.stat().st_size:,} bytes, {total} tables)")
