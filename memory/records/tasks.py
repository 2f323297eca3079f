"""django-q2 entry points of the records area: ids in, one service call, safe to run twice."""

from __future__ import annotations


def embed_records(record_ids: list[str]) -> int:
    """Fill the derived embedding of records (only rows still without one)."""
    from memory.retrieval.embedding import embed_record_ids

    return embed_record_ids(record_ids)


def derive_context(record_ids: list[str]) -> int:
    """Derive the context windows of episodic records and of their neighbours (retrieval owns the logic)."""
    from memory.retrieval.context import refresh_context

    return refresh_context(record_ids)
