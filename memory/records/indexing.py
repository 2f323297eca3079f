"""Derived read surfaces of a record: the full-text vector (filled on write), the embedding (by task) and,
for episodic records, the context window (by task, memory/retrieval/context.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction
from django.db.models import Expression
from django.db.models.fields.json import KT

from memory.models import MemoryRecord, MemoryType
from memory.queues import embedding_queue, enqueue
from memory.search import TEXT_SEARCH_CONFIG


def record_search_vector() -> Expression:
    # The sentence is weighted above the raw value and field name, which still make an exact
    # identifier (an order id, a region code) findable even when the sentence paraphrases it.
    return (
        SearchVector("text", config=TEXT_SEARCH_CONFIG, weight="A")
        + SearchVector(KT("fact__value"), "field", "kind", config=TEXT_SEARCH_CONFIG, weight="B")
    )


def record_search_vector_sql() -> tuple[str, list[Any]]:
    """``record_search_vector()`` as SQL and parameters. Its column references name the records table, so
    it can be evaluated over any row source given that table's name as alias (a staging table of new rows)."""
    query = MemoryRecord.objects.all().query
    compiler = query.get_compiler(connection=connection)
    sql, params = compiler.compile(record_search_vector().resolve_expression(query))
    return sql, list(params)


def refresh_search_vectors(record_ids: Iterable[str], *, episodic: bool | None = None) -> int:
    ids = list(record_ids)
    if not ids:
        return 0
    # Encrypted classes get no full-text vector: it would be plaintext beside the ciphertext.
    updated = (MemoryRecord.objects.filter(pk__in=ids, memory_class__encryption_required=False)
               .update(search_vector=record_search_vector()))
    schedule_context(ids, episodic=episodic)
    return updated


def schedule_context(ids: list[str], *, episodic: bool | None = None) -> bool:
    """After commit, derive the context windows that these records start or change (episodic records only).

    The records are marked pending in the caller's transaction (retrieval.PendingContext), so health's
    ``derived_pending`` counts them from the moment they are readable until their windows are derived.
    ``episodic`` saves the look-up when the caller knows; a write of semantic facts queues nothing.

    Returns whether the task queued also embeds every one of ``ids``: it embeds the records first (the windows are
    made of the turns' own vectors by default, and a windowed turn's blended vector needs its own vector either
    way), so the caller queues no embedding task of its own for them (a second task that finds nothing to embed
    still cost about 40 ms of the worker per 500 records)."""
    if episodic is False or not ids:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO retrieval_pendingcontext (record_id, tenant_id, subject_id, queued_at) "
            "SELECT id, tenant_id, subject_id, now() FROM memory_memoryrecord "
            "WHERE id = ANY(%s) AND memory_type = %s ON CONFLICT (record_id, tenant_id) DO NOTHING",
            [list(ids), MemoryType.EPISODIC.value])
        marked = cursor.rowcount
    if not marked:
        return False
    # Embeds a window per record: an import's goes to the bulk queue, a few records' to the interactive one.
    transaction.on_commit(lambda: enqueue("memory.records.tasks.derive_context", ids,
                                          queue=embedding_queue(len(ids))))
    return True
