"""django-q2 entry points of the consolidation area: ids in, one service call, safe to run twice."""

from __future__ import annotations

from memory.consolidation import consolidate


def consolidate_candidate(candidate_id: str) -> str:
    """Consolidate one pending candidate; a re-delivered task changes nothing."""
    return consolidate(candidate_id)
