"""Restore a `manage.py backup` archive into the configured database, then re-apply every deletion since.

    manage.py restore var/backups/engram-20261204T140000Z.dump

Stop the web and worker processes first: the command refuses while other sessions are connected to the
database (``--disconnect`` ends them). Then, in order:

1. a safety backup of the database as it is now (ENGRAM_BACKUP_DIR/pre-restore-<time>.dump;
   ``--no-safety-backup`` skips it);
2. the public schema is replaced by the archive's (pg_restore in one transaction);
3. ``migrate``: an archive from an older release is brought to this release's schema, then ``ANALYZE`` (an
   archive holds no planner statistics);
4. the deletion journal (ENGRAM_DELETION_JOURNAL) is replayed: every deletion requested after the backup
   is planned again from the restored rows, tombstoned, and run to completion here, before the command
   returns; deletion jobs the archive holds unfinished are resumed the same way;
5. the derived-data sweeps (missing embeddings and windows, subject indexes) are
   queued for the workers. Embeddings, windows and indexes are in the archive; the sweeps cover
   what was still queued when it was taken.

If the journal directory is missing or empty the command refuses to restore, unless ``--no-journal``
confirms that no deletion can have been requested since the backup. A re-applied job that fails leaves
the command failing; fix the cause and run ``manage.py restore --replay-only``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils import timezone

from memory import backup
from memory.deletion.journal import journal_dir, journal_entries
from memory.deletion.restore import ReplayResult as JournalReplay
from memory.deletion.restore import journal_replay
from memory.management import progress_bar
from memory.queues import BULK, enqueue


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", nargs="?", help="a pg_dump archive written by `manage.py backup`")
        parser.add_argument("--replay-only", action="store_true",
                            help="only replay the deletion journal (after fixing what made a re-applied job fail)")
        parser.add_argument("--disconnect", action="store_true",
                            help="end other sessions on the database (web and workers still running)")
        parser.add_argument("--no-safety-backup", action="store_true",
                            help="do not back up the current database before replacing it")
        parser.add_argument("--no-journal", action="store_true",
                            help="restore without a deletion journal (only when none can exist, e.g. a fresh host)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["replay_only"]:
            self._report(journal_replay())
            return
        if not options["archive"]:
            raise CommandError("name the archive to restore")
        archive = Path(options["archive"])
        if not archive.exists():
            raise CommandError(f"no archive at {archive}")
        lines = sum(1 for _ in journal_entries())
        if lines == 0 and not options["no_journal"]:
            raise CommandError(
                f"the deletion journal at {journal_dir()} is empty or missing: a deletion requested after this "
                "backup would come back. Point ENGRAM_DELETION_JOURNAL at the journal, or pass --no-journal "
                "if no deletion can have been requested since the backup.")
        others = backup.other_sessions()
        if others and not options["disconnect"]:
            raise CommandError(f"{len(others)} other session(s) are connected to {backup.target().dbname} "
                               "(stop the web and worker processes, or pass --disconnect)")
        try:
            self._restore(archive, options, journal_lines=lines)
        except backup.BackupError as exc:
            raise CommandError(str(exc)) from exc

    def _restore(self, archive: Path, options: dict[str, Any], *, journal_lines: int) -> None:
        quiet = options["no_progress"]
        entries = backup.archive_entries(archive)  # refuses an unreadable archive before anything is dropped
        with progress_bar(disable=quiet) as progress:
            if not options["no_safety_backup"]:
                safety = Path(settings.ENGRAM_BACKUP_DIR) / f"pre-restore-{timezone.now():%Y%m%dT%H%M%SZ}.dump"
                task = progress.add_task("safety backup", total=backup.table_count())
                backup.backup(safety, advance=lambda n: progress.advance(task, n))
                progress.console.print(f"the database as it was: {safety}")
            if options["disconnect"]:
                backup.disconnect_others()
            task = progress.add_task(f"restoring {backup.target().dbname}", total=entries)
            backup.restore(archive, advance=lambda n: progress.advance(task, n))
            progress.update(task, completed=entries)
            call_command("migrate", interactive=False, verbosity=0)
            # An archive holds rows and indexes, not the planner's statistics: until autovacuum analysed the new
            # tables, a large subject's retrieves were planned as if it had a handful of rows (about 25× slower).
            task = progress.add_task("planner statistics", total=1)
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
            progress.advance(task, 1)
            task = progress.add_task("deletion journal", total=journal_lines)
            replay = journal_replay(progress=lambda: progress.advance(task, 1))
        # The cache tables come back empty (the archive holds no cache rows): nothing cached before the restore is
        # served after it. Queued only now, after every step above committed (the broker is a table of this database).
        enqueue("memory.records.tasks.embed_pending", queue=BULK)
        enqueue("memory.retrieval.tasks.sweep_subject_indexes", queue=BULK)
        connection.close()
        self.stdout.write(f"restored {archive}.")
        self._report(replay)

    def _report(self, replay: JournalReplay) -> None:
        counts = replay.as_dict()
        self.stdout.write(
            f"Deletions since the backup re-applied: {counts['reapplied']}, unfinished "
            f"jobs resumed: {counts['resumed']}, completed now: {counts['completed']}, failed: {counts['failed']}.")
        if replay.failed:
            raise CommandError(f"deletion jobs failed after the restore: {', '.join(replay.failed)}; see "
                               "/review/overview/ or GET /api/v1/deletions/<id>, fix the cause and run "
                               "`manage.py restore --replay-only`")
