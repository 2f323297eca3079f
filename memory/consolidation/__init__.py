"""Consolidation of model-inferred candidates (see docs/consolidation.md).

``consolidate(candidate_id)`` is what the django-q2 task calls. It is two steps so that tests (and
readers) can see the race window: ``take_snapshot`` reads the record head and computes the embedding
outside any lock; ``apply_snapshot`` re-reads the head under the key lock and writes compare-and-set.
"""

from __future__ import annotations

from memory.consolidation.pipeline import (
    NEAR_DUPLICATE_THRESHOLD,
    Snapshot,
    apply_snapshot,
    consolidate,
    take_snapshot,
)

__all__ = ["NEAR_DUPLICATE_THRESHOLD", "Snapshot", "apply_snapshot", "consolidate", "take_snapshot"]
