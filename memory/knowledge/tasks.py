"""django-q2 tasks of the knowledge area: take ids, call a service, safe to run twice."""

from __future__ import annotations

from memory.knowledge.indexing import embed_document_chunks


def embed_document(document_id: int) -> int:
    """Fill the embeddings of a large document's chunks after ingest (see services.py)."""
    return embed_document_chunks(document_id=document_id)
