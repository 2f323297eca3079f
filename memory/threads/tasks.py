"""django-q2 entry points of the threads area: ids in, one service call, safe to run twice."""

from __future__ import annotations

from memory.threads.services.retention import threads_purge_inactive
from memory.threads.services.summaries import summaries_embed, summary_regenerate


def regenerate_summary(summary_id: str) -> str | None:
    return summary_regenerate(summary_id=summary_id)


def embed_summaries(summary_ids: list[str]) -> int:
    return summaries_embed(summary_ids=summary_ids)


def purge_inactive_threads() -> dict[str, int]:
    """The daily thread-state retention sweep (Schedule 'engram.purge_inactive_threads')."""
    return vars(threads_purge_inactive())
