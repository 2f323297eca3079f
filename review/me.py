"""Reads for /me/: a person's own memories, searched, filtered and paged inside SQL.

Every query starts from ``MemoryRecord.objects.for_scope(scope)`` with the person's owner scope, the
query the API's list uses, so the tenant, subject and class-reader predicates are in the SQL. Search
is Postgres full text over the record's GIN-indexed ``search_vector`` (the vector retrieval's lexical
leg uses); filters and the page are SQL too, so a page costs the same with 50 memories or 10,000.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchQuery
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Now

from memory.content import unseal, unseal_text
from memory.deletion.models import DeletionJob
from memory.models import Confidence, MemoryRecord, RecordStatus, SourceType
from memory.namespaces import to_list
from memory.records.selectors import effective_status
from memory.scope import Scope
from memory.search import TEXT_SEARCH_CONFIG
from memory.tombstones import subject_hash
from review.words import SOURCE_WORDS, Provenance, provenance

PAGE_SIZE = 50
MAX_SEARCH_WORDS = 12
# Characters with a meaning in tsquery syntax never reach it: each word is quoted as a lexeme prefix.
_WORD = re.compile(r"[^\s\"'()<>!|&:*\\]+")

STATUS_CHOICES = [("", "Any status"), ("active", "Current"), ("candidate", "Unconfirmed guesses"),
                  ("superseded", "Replaced"), ("expired", "Expired")]
SOURCE_CHOICES = [("", "Any source"), *((code, SOURCE_WORDS[code]) for code in SourceType.values)]


# A record reads as deleted from the DELETE on, but its job blanks the content later: until then the person
# still sees it here, marked as being deleted (with its job); once blank it is gone from the page.
_GONE = Q(status=RecordStatus.DELETED, text="")


def search_query(text: str) -> SearchQuery | None:
    """Every word must match, as a prefix ("ais" finds "aisle"); stemmed like the stored vectors."""
    words = [w.strip("-") for w in _WORD.findall(text)][:MAX_SEARCH_WORDS]
    terms = [f"'{w}':*" for w in words if w]
    if not terms:
        return None
    return SearchQuery(" & ".join(terms), search_type="raw", config=TEXT_SEARCH_CONFIG)


def my_records(*, scope: Scope, q: str = "", namespace: str = "", status: str = "",
               source: str = "") -> QuerySet[MemoryRecord]:
    """The person's records matching the search and filters, newest first (ties broken by id: a stable order)."""
    qs = MemoryRecord.objects.for_scope(scope).exclude(_GONE)
    if namespace:
        qs = qs.under([namespace])  # type: ignore[attr-defined]
    if source:
        qs = qs.filter(source_type=source)
    if status == "active":
        qs = qs.live().filter(confidence=Confidence.CONFIRMED)
    elif status == "candidate":
        qs = qs.live().filter(confidence=Confidence.CANDIDATE)
    elif status == "expired":
        qs = qs.filter(Q(status=RecordStatus.EXPIRED) | Q(status=RecordStatus.ACTIVE, valid_until__lte=Now()))
    elif status:
        qs = qs.filter(status=status)
    query = search_query(q) if q else None
    if q and query is None:
        return qs.none()
    if query is not None:
        qs = qs.filter(search_vector=query)
    return qs.order_by("-created_at", "-pk")


def my_namespaces(*, scope: Scope) -> list[str]:
    """Every namespace (and each of its parents) the person has memories in, for the filter."""
    found = (MemoryRecord.objects.for_scope(scope).exclude(_GONE)
             .order_by().values_list("namespace", flat=True).distinct())
    prefixes: set[str] = set()
    for namespace in found:
        parts = to_list(namespace)
        prefixes.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(prefixes)


@dataclass
class Row:
    """One memory as /me/ shows it."""

    id: str
    namespace: str
    field: str
    value: Any
    text: str
    status: str  # effective status, or "candidate" for a live guess, or "deleting"
    is_guess: bool
    provenance: Provenance
    created_at: Any
    deletion: DeletionJob | None = None

    @property
    def editable(self) -> bool:
        return self.status in ("active", "candidate")


def row_of(record: MemoryRecord, *, deletion: DeletionJob | None = None) -> Row:
    fact, text = unseal(record)
    event = record.source_event
    status = effective_status(record)
    is_guess = record.confidence == Confidence.CANDIDATE and status == RecordStatus.ACTIVE
    if deletion is not None and deletion.status in (DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING):
        shown = "deleting"
    else:
        shown = "candidate" if is_guess else status
    quote = unseal_text(event.text) if event is not None else ""
    date = (event.occurred_at or event.created_at) if event is not None else record.created_at
    confirmed_guess = getattr(record, "previous_confidence", None) == Confidence.CANDIDATE
    return Row(id=record.pk, namespace=record.namespace, field=record.field, value=fact.get("value"), text=text,
               status=shown, is_guess=is_guess and shown != "deleting",
               provenance=provenance(source_type=record.source_type, confidence=record.confidence, quote=quote,
                                     date=date, source_ref=record.source_ref, confirmed_guess=confirmed_guess),
               created_at=record.created_at, deletion=deletion)


def _with_provenance(qs: QuerySet[MemoryRecord]) -> QuerySet[MemoryRecord]:
    # The superseded record's confidence tells "you confirmed a guess" from "you said"; derived columns
    # (the 384-float vectors, the tsvector) are never needed to show a page.
    return (qs.select_related("memory_class", "source_event")
            .annotate(previous_confidence=F("supersedes__confidence"))
            .defer("embedding", "blended_embedding", "search_vector", "context_terms"))


def deletions_for(*, scope: Scope, memory_ids: list[str]) -> dict[str, DeletionJob]:
    """The deletion job of each listed record that has one, in one query."""
    jobs = DeletionJob.objects.filter(tenant_id=scope.tenant_id,
                                      subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id),
                                      kind=DeletionJob.Kind.MEMORY, memory_id__in=memory_ids)
    return {job.memory_id: job for job in jobs.only("id", "memory_id", "status")}


def my_page(*, scope: Scope, number: Any, **filters: str) -> tuple[Page, list[Row]]:
    """One page of the person's records and its rows: a COUNT, the page's ids, its rows, its deletion jobs.

    The page is chosen on the narrow (id, created_at) rows and only its 50 records are then read in full:
    sorting whole rows (sentence, fact, joined source event) before the LIMIT cost most of the page time at
    10,000 memories (bench/me_page.py), the last page most of all."""
    ids_page = Paginator(my_records(scope=scope, **filters).values_list("pk", flat=True), PAGE_SIZE).get_page(number)
    ids = list(ids_page.object_list)
    by_id = {r.pk: r for r in _with_provenance(MemoryRecord.objects.for_scope(scope)).filter(pk__in=ids)}
    records = [by_id[i] for i in ids if i in by_id]
    jobs = deletions_for(scope=scope, memory_ids=ids)
    return ids_page, [row_of(r, deletion=jobs.get(r.pk)) for r in records]


def my_row(*, scope: Scope, memory_id: str) -> Row | None:
    record = _with_provenance(MemoryRecord.objects.for_scope(scope)).filter(pk=memory_id).first()
    if record is None:
        return None
    return row_of(record, deletion=deletions_for(scope=scope, memory_ids=[record.pk]).get(record.pk))


def my_deletions(*, scope: Scope, limit: int = 100) -> tuple[list[DeletionJob], dict[str, int]]:
    """The subject's deletion jobs, newest first, and how many there are in each status."""
    jobs = DeletionJob.objects.filter(tenant_id=scope.tenant_id,
                                      subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id))
    counts = dict(jobs.order_by().values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    return list(jobs.order_by("-created_at", "-pk")[:limit]), counts
