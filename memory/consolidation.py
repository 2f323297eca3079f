"""Consolidation of model-inferred candidates. Placeholder until the consolidation issue lands:
candidates stay pending (never facts), which is the safe default."""

from __future__ import annotations


def consolidate(candidate_id: str) -> str:
    return "pending"
