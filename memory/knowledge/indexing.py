"""Rebuilding the derived columns of chunks (embedding, full-text vector) from their text.

Ingest fills both, so this is for recovery and model changes: ``manage.py reembed_knowledge``.
Rows are overwritten in place by id, one UPDATE per batch, so retrieval never sees a gap; by
default only chunks without an embedding are embedded, so a second run does no work twice.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db import connection

from memory.db.vectors import execute_with_vectors
from memory.embedder import get_embedder
from memory.knowledge.models import Chunk
from memory.search import TEXT_SEARCH_CONFIG

BATCH_SIZE = 256


def chunk_ids(*, tenant_id: int | None = None, only_missing: bool = True) -> list[int]:
    qs = Chunk.objects.all()
    if tenant_id is not None:
        qs = qs.filter(document__tenant_id=tenant_id)
    if only_missing:
        qs = qs.filter(embedding__isnull=True)
    return list(qs.order_by("pk").values_list("pk", flat=True))


def refresh_chunk_search_vectors(*, tenant_id: int | None = None, document_id: int | None = None) -> int:
    """Title (weight B) and text (weight A): a query naming the document finds all its chunks."""
    sql = ("UPDATE knowledge_chunk c SET search_vector = setweight(to_tsvector(%s::regconfig, d.title), 'B') "
           "|| setweight(to_tsvector(%s::regconfig, c.text), 'A') FROM knowledge_document d WHERE d.id = c.document_id")
    params: list[str | int] = [TEXT_SEARCH_CONFIG, TEXT_SEARCH_CONFIG]
    if tenant_id is not None:
        sql += " AND d.tenant_id = %s"
        params.append(tenant_id)
    if document_id is not None:
        sql += " AND c.document_id = %s"
        params.append(document_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def embed_document_chunks(*, document_id: int) -> int:
    """Fill the missing embeddings of one document's chunks (the ingest task). Idempotent: a
    re-delivered task finds nothing missing; after a newer version the old chunk ids are gone."""
    ids = list(Chunk.objects.filter(document_id=document_id, embedding__isnull=True)
               .order_by("pk").values_list("pk", flat=True))
    return embed_chunks(ids, only_missing=True)


def embed_chunks(ids: list[int], *, batch_size: int = BATCH_SIZE, only_missing: bool = False,
                 progress: Callable[[int], None] | None = None) -> int:
    embedder = get_embedder()
    written = 0
    for start in range(0, len(ids), batch_size):
        rows = list(Chunk.objects.filter(pk__in=ids[start:start + batch_size]).values_list("pk", "text"))
        vectors = embedder.embed([text for _, text in rows])
        written += execute_with_vectors(
            "UPDATE knowledge_chunk c SET embedding = v.e FROM unnest(%s::bigint[], %b::vector[]) "
            "AS v(id, e) WHERE c.id = v.id" + (" AND c.embedding IS NULL" if only_missing else ""),
            [[pk for pk, _ in rows], [np.asarray(v, dtype=np.float32) for v in vectors]])
        if progress:
            progress(len(rows))
    return written
