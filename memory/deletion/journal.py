"""The deletion journal: every requested deletion, kept outside the database, re-applied after a restore.

A backup is a picture of the database at one moment. Restoring it brings back every record that was
deleted *after* that moment, together with its content, and loses the tombstones that stop a delayed
write from resurrecting it. So each deletion request is also appended here, to a JSON-lines file under
``ENGRAM_DELETION_JOURNAL`` (default ``var/deletion-journal/``), before its transaction commits, and
``manage.py restore`` replays the journal before the service serves again (memory/deletion/restore.py).

A line holds what the job row holds and nothing more: ids (record, event, thread, subject primary key),
the keyed hashes of the subject and of the tombstones, the kind, the actor and the time. No content:
the journal is as safe to keep as the tombstones. Replaying needs no content either, because the
restored database still holds the rows (the backup predates their deletion) and the plan is made again
from them.

Replay is idempotent: a line whose job is in the database is left to that job (resumed when unfinished),
a line whose rows are not in the database (created after the backup, or already gone) does nothing,
and a re-applied deletion keeps its original job id, so the id a client was given still resolves.
A request whose transaction rolled back after the line was written is applied on restore too: the
person asked for it, and over-deleting on their request is the safe side.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

logger = logging.getLogger("engram.deletion")

VERSION = 1
# A line without a job: one thread event blanked in place by DELETE .../events/{id} or a pop.
EVENT_KIND = "thread_event"


def journal_dir() -> Path:
    return Path(settings.ENGRAM_DELETION_JOURNAL)


def journal_entry(job: Any) -> dict[str, Any]:
    """The content-free line for one job (``plan`` is ids and keyed hashes only, see DeletionJob)."""
    return {"v": VERSION, "job_id": job.pk, "kind": job.kind, "tenant_id": job.tenant_id, "subject_id": job.subject_id,
            "subject_hash": job.subject_hash, "memory_id": job.memory_id, "requested_by": job.requested_by,
            "requested_at": (job.created_at or timezone.now()).isoformat(), "plan": job.plan}


def journal_append(job: Any) -> None:
    """Append a deletion job's line (see ``journal_write``)."""
    journal_write(journal_entry(job))


def journal_event_deletion(*, tenant_id: int, subject_id: int, subject_hash: str, thread_id: str,
                           event_id: str, actor: str) -> None:
    """Append the line of one thread event blanked in place (a synchronous deletion without a job)."""
    journal_write({"v": VERSION, "job_id": "", "kind": EVENT_KIND, "tenant_id": tenant_id,
                   "subject_hash": subject_hash, "memory_id": "", "requested_by": actor,
                   "requested_at": timezone.now().isoformat(),
                   "plan": {"subject_id": subject_id, "thread_id": thread_id, "event_ids": [event_id]}})


def journal_write(entry: dict[str, Any]) -> None:
    """Append one line, durably (fsync), before the request's transaction commits.

    Written before the commit rather than on it: a crash between the two then leaves a line for a deletion
    that may not have committed (replayed on restore: the person asked for it), never a committed deletion
    without a line. A failure to write raises, and the request fails with it: a deletion the journal does
    not hold could come back with the next restore.
    """
    directory = journal_dir()
    directory.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(entry, separators=(",", ":"), sort_keys=True) + "\n").encode()
    # One file a month, so an operator can drop the months older than the oldest backup they keep.
    path = directory / f"deletions-{timezone.now():%Y-%m}.jsonl"
    # O_APPEND and a single write: lines from concurrent processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def journal_entries(directory: Path | None = None) -> Iterator[dict[str, Any]]:
    directory = directory or journal_dir()
    for path in sorted(directory.glob("deletions-*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    yield json.loads(raw)
                except json.JSONDecodeError:
                    # A torn last line (a crash inside the write) is the only way to get here; its
                    # request did not commit either, so skipping it loses nothing.
                    logger.warning("deletion journal %s line %d is not JSON; skipped", path.name, number)
