"""The candidate queries of memory retrieval. Each starts from ``MemoryRecord.objects.for_scope(scope)``,
so tenant, subject and namespace predicates are in its SQL; validity is in the SQL too (``live()``).

Vector search is an exact scan, always. Reads are scoped to one subject, and pgvector 0.6 has no
iterative index scans: an HNSW scan under a selective subject filter returns fewer rows than asked,
or none (STACK_NOTES). There is no HNSW index on the column (memory migration 0002), and the
ORDER BY adds ``+ 0`` so that one added later still cannot be chosen for a scoped query: the
planner goes through the (tenant, subject, status) btree and sorts the subject's rows exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, FloatField, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Now
from pgvector.django import CosineDistance

from memory.models import Confidence, Conflict, MemoryRecord, RecordStatus
from memory.scope import Scope

RECORD_COLUMNS = ("id", "namespace", "kind", "memory_type", "field", "fact", "text", "source_type", "confidence",
                  "valid_from", "created_at", "memory_class", "content_hash", "status", "valid_until")


@dataclass(frozen=True)
class Filters:
    """The request's task filters, after validation and narrowing to the scope."""

    namespaces: list[str] | None  # None: every namespace the scope allows
    kinds: list[str] | None = None
    types: list[str] | None = None
    fields: list[str] | None = None
    source_types: list[str] | None = None


def _open_conflict() -> Exists:
    return Exists(Conflict.records.through.objects.filter(
        memoryrecord_id=OuterRef("pk"), conflict__status=Conflict.Status.OPEN))


def _filtered(qs: QuerySet[MemoryRecord], filters: Filters) -> QuerySet[MemoryRecord]:
    if filters.namespaces is not None:
        qs = qs.under(filters.namespaces)  # type: ignore[attr-defined]
    if filters.kinds:
        qs = qs.filter(kind__in=filters.kinds)
    if filters.types:
        qs = qs.filter(memory_type__in=filters.types)
    if filters.fields:
        qs = qs.filter(field__in=filters.fields)
    if filters.source_types:
        qs = qs.filter(source_type__in=filters.source_types)
    return qs


def eligible(scope: Scope, filters: Filters) -> QuerySet[MemoryRecord]:
    """Scoped, live and servable: confirmed records, and candidates where the class allows serving them."""
    servable = Q(confidence=Confidence.CONFIRMED) | Q(confidence=Confidence.CANDIDATE,
                                                      memory_class__candidates_retrievable=True)
    return _filtered(MemoryRecord.objects.for_scope(scope).live().filter(servable), filters)


def lexical(scope: Scope, filters: Filters, query: SearchQuery | None, k: int) -> list[MemoryRecord]:
    """Full-text leg: websearch_to_tsquery over the GIN-indexed vector, ranked by cover density."""
    if query is None:
        return []
    return list(
        eligible(scope, filters).filter(search_vector=query)
        .annotate(lexical_score=SearchRank(F("search_vector"), query, cover_density=True),
                  in_conflict=_open_conflict())
        .select_related("memory_class").only(*RECORD_COLUMNS)
        .order_by("-lexical_score", "-created_at", "pk")[:k]
    )


def semantic(scope: Scope, filters: Filters, vector: list[float], k: int) -> list[MemoryRecord]:
    """Vector leg: exact cosine distance over the subject's rows (see the module docstring)."""
    distance = CosineDistance("embedding", vector) + Value(0.0, output_field=FloatField())
    return list(
        eligible(scope, filters).filter(embedding__isnull=False)
        .annotate(distance=distance, in_conflict=_open_conflict())
        .select_related("memory_class").only(*RECORD_COLUMNS)
        .order_by("distance", "pk")[:k]
    )


def semantic_pending(scope: Scope, filters: Filters) -> int:
    """Eligible records the vector leg cannot see yet (embedding still being computed)."""
    return eligible(scope, filters).filter(embedding__isnull=True, memory_class__embed=True).count()


def excluded(scope: Scope, filters: Filters, query: SearchQuery | None, vector: list[float],
             max_distance: float, k: int) -> list[dict[str, Any]]:
    """Scoped records that match the query but may not be served: superseded, expired, deleted, or a
    candidate of a class that does not serve candidates. Read only to explain them in ``dropped`` and
    the log; the candidate legs above never see them."""
    scoped = _filtered(MemoryRecord.objects.for_scope(scope), filters)
    not_live = (~Q(status=RecordStatus.ACTIVE) | Q(valid_until__lte=Now())
                | Q(confidence=Confidence.CANDIDATE, memory_class__candidates_retrievable=False))
    # Without a query vector (the embedding model is down) only lexical matches can be explained.
    near: Any = CosineDistance("embedding", vector) if vector else Value(None, output_field=FloatField())
    matches = Q(embedding__isnull=False) & Q(near__lt=max_distance) if vector else Q(pk__in=[])
    if query is not None:
        matches |= Q(search_vector=query)
    rows = (scoped.filter(not_live)
            .annotate(near=near, is_expired=ExpressionWrapper(Q(valid_until__lte=Now()),
                                                              output_field=BooleanField()))
            .filter(matches)
            .order_by("near", "pk")
            .values("id", "namespace", "kind", "text", "status", "confidence", "is_expired", "near",
                    "memory_class__max_retention", "memory_class__default_ttl")[:k])
    result = []
    for row in rows:
        if row["status"] == RecordStatus.ACTIVE:
            row["reason"] = "expired" if row["is_expired"] else "candidate_not_retrievable"
        else:
            row["reason"] = row["status"]  # superseded / expired / deleted
        result.append(row)
    return result
