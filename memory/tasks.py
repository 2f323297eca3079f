"""django-q2 task entry points. Each takes ids, calls a service, and is safe to run twice."""

from __future__ import annotations


def embed_records(record_ids: list[str]) -> int:
    """Fill the derived embedding of records (retrieval issue owns the embedder)."""
    from memory.retrieval.embedding import embed_record_ids

    return embed_record_ids(record_ids)


def consolidate_candidate(candidate_id: str) -> str:
    """Consolidate one pending candidate (consolidation issue owns the logic)."""
    from memory.consolidation import consolidate

    return consolidate(candidate_id)


def derive_context(record_ids: list[str]) -> int:
    """Derive the context windows of episodic records and of their neighbours (retrieval owns the logic)."""
    from memory.retrieval.context import refresh_context

    return refresh_context(record_ids)
