"""django-q2 entry points of the retrieval area: ids in, one service call, safe to run twice."""

from __future__ import annotations

from memory.retrieval import centroid
from memory.retrieval.subject_index import maintain, queue_maintenance, sweep


def maintain_subject_index(subject_id: int) -> str:
    """Build, refresh or drop one large subject's own search indexes and term statistics."""
    return maintain(subject_id)


def sweep_subject_indexes() -> int:
    """The engram.subject_indexes schedule: queue maintenance for every subject that needs it, and compute the
    centroids no worker task did (subjects written before centroids existed); returns how many were queued."""
    centroid.refresh_missing()
    due = sweep()
    for subject_id in due:
        queue_maintenance(subject_id)
    return len(due)
