"""Embedder interface. Placeholder until the retrieval issue lands: embeddings stay NULL."""

from __future__ import annotations


def embed_record_ids(record_ids: list[str]) -> int:
    return 0
