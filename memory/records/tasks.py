"""django-q2 entry points of the records area: ids in, one service call, safe to run twice."""

from __future__ import annotations


def embed_records(record_ids: list[str]) -> int:
    """Fill the derived embedding of records (only rows still without one)."""
    from memory.retrieval.embedding import embed_record_ids

    return embed_record_ids(record_ids)
