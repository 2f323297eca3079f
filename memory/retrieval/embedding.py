"""Filling the derived embedding column of records, in batches, idempotently.

Only rows that still lack an embedding are touched, so a re-delivered task or a second run of
``reembed`` does no work twice. Classes with ``embed=False`` (e.g. encrypted health data) are
never embedded: a vector of sensitive text would leak it beside the ciphertext.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from django.db import transaction

from memory.content import unseal_parts
from memory.db.vectors import execute_with_vectors
from memory.embedder import get_embedder
from memory.models import MemoryRecord
from memory.retrieval.centroid import vectors_written
from memory.retrieval.pending import pending_records

# One import call's task (500 records) is one read, one run of the model and one UPDATE: fewer round trips
# between the model's batches, and sorting 500 texts by length pads less than two halves do.
BATCH_SIZE = 500


def pending_ids(*, tenant_id: int | None = None, created_before: dt.datetime | None = None) -> list[str]:
    """Ids of the pending records; with ``created_before``, only those written before then."""
    qs = pending_records()
    if tenant_id is not None:
        qs = qs.filter(tenant_id=tenant_id)
    if created_before is not None:
        qs = qs.filter(created_at__lt=created_before)
    return list(qs.order_by("pk").values_list("pk", flat=True))


def write_embeddings(pairs: Sequence[tuple[str, Sequence[float]]], *, only_missing: bool = True) -> int:
    """One UPDATE for many rows, the vectors sent in binary; by default only rows still without one (idempotent
    under retries)."""
    if not pairs:
        return 0
    missing = " AND r.embedding IS NULL" if only_missing else ""
    # A new vector for a record that had one (a re-embedding) leaves its blend with the old one until its window is
    # derived again (context.py): cleared meanwhile, so the record is found by its own vector only.
    unblend = "" if only_missing else ", blended_embedding = NULL"
    return execute_with_vectors(
        f"UPDATE memory_memoryrecord AS r SET embedding = v.e{unblend} "
        "FROM unnest(%s::text[], %b::vector[]) AS v(id, e) WHERE r.id = v.id AND r.status <> 'deleted'" + missing,
        [[p[0] for p in pairs], [np.asarray(p[1], dtype=np.float32) for p in pairs]],
    )


def embed_record_ids(record_ids: list[str], *, batch_size: int = BATCH_SIZE, only_missing: bool = True,
                     progress: Callable[[int], None] | None = None) -> int:
    """Embed the given records that need it (all of them with only_missing=False); returns rows written."""
    embedder = get_embedder()
    done = 0
    for start in range(0, len(record_ids), batch_size):
        chunk = record_ids[start:start + batch_size]
        qs = MemoryRecord.objects.filter(pk__in=chunk, memory_class__embed=True).exclude(status="deleted")
        if only_missing:
            qs = qs.filter(embedding__isnull=True)
        # Plain tuples: the text is all the model needs, and 500 model instances cost more than the read.
        rows = list(qs.values_list("pk", "fact", "text", "subject_id"))
        texts = [unseal_parts(fact, text)[1] for _, fact, text, _ in rows]
        vectors = embedder.embed(texts, batch_size=64)
        # The subjects' centroids follow their vectors in the same transaction: nothing reads the vectors as
        # derived (health) while the centroid that shapes their similarities is behind.
        with transaction.atomic():
            done += write_embeddings([(row[0], v) for row, v in zip(rows, vectors, strict=True)],
                                     only_missing=only_missing)
            vectors_written(Counter(row[3] for row in rows))
        if progress:
            progress(len(chunk))
    return done
