"""Derived read surfaces of a record: the full-text vector (filled on write) and the embedding (by task)."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.postgres.search import SearchVector
from django.db.models import Expression
from django.db.models.fields.json import KT

from memory.models import MemoryRecord
from memory.search import TEXT_SEARCH_CONFIG


def record_search_vector() -> Expression:
    # The sentence is weighted above the raw value and field name, which still make an exact
    # identifier (an order id, a region code) findable even when the sentence paraphrases it.
    return (
        SearchVector("text", config=TEXT_SEARCH_CONFIG, weight="A")
        + SearchVector(KT("fact__value"), "field", "kind", config=TEXT_SEARCH_CONFIG, weight="B")
    )


def refresh_search_vectors(record_ids: Iterable[str]) -> int:
    ids = list(record_ids)
    if not ids:
        return 0
    # Encrypted classes get no full-text vector: it would be plaintext beside the ciphertext.
    return (MemoryRecord.objects.filter(pk__in=ids, memory_class__encryption_required=False)
            .update(search_vector=record_search_vector()))
