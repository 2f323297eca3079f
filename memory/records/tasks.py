"""django-q2 entry points of the records area: ids in, one service call, safe to run twice."""

from __future__ import annotations

from memory.db.statistics import analyse_written_tables
from memory.retrieval import context
from memory.retrieval.context import refresh_context
from memory.retrieval.embedding import embed_record_ids, pending_ids
from memory.retrieval.subject_index import after_writes_to


def embed_records(record_ids: list[str]) -> int:
    """Fill the derived embedding of records (only rows still without one)."""
    written = embed_record_ids(record_ids)
    after_writes_to(record_ids)  # a subject that grew past the threshold gets its own indexes
    analyse_written_tables()  # a fresh database's next writes check their foreign keys by the row's id
    return written


def derive_context(record_ids: list[str]) -> int:
    """Derive the context windows of episodic records and of their neighbours (retrieval owns the logic)."""
    written = refresh_context(record_ids)
    after_writes_to(record_ids)
    analyse_written_tables()
    return written


def embed_pending(limit: int = 20_000) -> int:
    """Embed active records still without an embedding, and derive the context windows still pending, whose task
    could not be queued or was lost (the model was down, a worker died); the engram.embed_pending schedule runs it
    every five minutes on the bulk queue.

    Only work older than ENGRAM_EMBED_PENDING_GRACE: younger work has its own task queued (an import being embedded
    has thousands), and doing it here too did the import's work twice."""
    import datetime as dt

    from django.conf import settings
    from django.utils import timezone

    before = timezone.now() - dt.timedelta(seconds=settings.ENGRAM_EMBED_PENDING_GRACE)
    embedded = embed_record_ids(pending_ids(created_before=before)[:limit])
    lost = context.pending_ids(queued_before=before)[:limit]
    for start in range(0, len(lost), 500):
        refresh_context(lost[start:start + 500])
    return embedded
