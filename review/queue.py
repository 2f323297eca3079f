"""Reads for the review queue: candidates waiting for a person and open conflicts, in the reviewer's tenants."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from memory.content import unseal, unseal_candidate, unseal_text
from memory.identity.access import Reviewer, reviewer_may_read
from memory.models import Candidate, Confidence, Conflict, MemoryRecord, Tenant
from memory.namespaces import under_any_q
from memory.policy.classes import class_for_namespace

MASK = "••• masked: reviewers may not read this class"
AGES = {"day": timedelta(days=1), "week": timedelta(days=7)}
PAGE = 100


@dataclass
class Shown:
    """A record as the queue shows it (unsealed, or masked)."""

    id: str
    value: Any
    text: str
    source_type: str
    status: str
    created_at: Any


@dataclass
class QueueItem:
    type: str  # "candidate" or "conflict"
    id: str
    tenant: Tenant
    subject: str  # the subject's external id, shown small beside its name
    namespace: str
    kind: str
    field: str
    created_at: Any
    masked: bool
    status: str = "review"
    proposed_value: Any = None
    proposed_text: str = ""
    evidence: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    reasons: list[dict[str, str]] = dataclasses.field(default_factory=list)
    current: list[Shown] = dataclasses.field(default_factory=list)  # the active record(s) it would affect
    proposed_record: Shown | None = None  # conflicts: the newest record
    snapshot_changed: bool = False
    subject_name: str = ""  # what people call the subject (Subject.name)

    @property
    def key(self) -> str:
        return f"{self.type}-{self.id}"

    @property
    def is_conflict(self) -> bool:
        return self.type == "conflict" or bool(self.current)


def _shown(record: MemoryRecord, masked: bool) -> Shown:
    fact, text = unseal(record)
    return Shown(id=record.pk, value=MASK if masked else fact.get("value"), text=MASK if masked else text,
                 source_type=record.source_type, status=record.status, created_at=record.created_at)


def _filtered(qs: Any, *, namespace: str | None, age: str | None, tenant: str | None) -> Any:
    if namespace:
        qs = qs.filter(under_any_q([namespace]))
    if age in AGES:
        qs = qs.filter(created_at__gte=timezone.now() - AGES[age])
    elif age == "older":
        qs = qs.filter(created_at__lt=timezone.now() - AGES["week"])
    if tenant:
        qs = qs.filter(tenant__slug=tenant)
    return qs


def candidate_item(candidate: Candidate, heads: dict[tuple, MemoryRecord] | None = None) -> QueueItem:
    masked = not reviewer_may_read(candidate.memory_class)
    key = (candidate.tenant_id, candidate.subject_id, candidate.namespace, candidate.field)
    if heads is None:
        heads = _live_heads([candidate])
    head = heads.get(key)
    fact, text, evidence = unseal_candidate(candidate)
    value = fact.get("value") if isinstance(fact, dict) else None
    return QueueItem(
        type="candidate", id=candidate.pk, tenant=candidate.tenant, subject=candidate.subject.external_id,
        subject_name=candidate.subject.name,
        namespace=candidate.namespace, kind=candidate.kind, field=candidate.field, created_at=candidate.created_at,
        masked=masked, status=candidate.status, proposed_value=MASK if masked else value,
        proposed_text=MASK if masked else text,
        evidence=[{**e, "text": MASK if masked else e.get("text", "")} for e in evidence],
        reasons=candidate.reasons, current=[_shown(head, masked)] if head else [],
        snapshot_changed=(head.pk if head else None) != candidate.conflict_record_id,
    )


def _live_heads(candidates: list[Candidate]) -> dict[tuple, MemoryRecord]:
    """The active confirmed record of each candidate's key, in one query."""
    if not candidates:
        return {}
    keys = Q(pk__in=[])
    for c in candidates:
        keys |= Q(tenant_id=c.tenant_id, subject_id=c.subject_id, namespace=c.namespace, field=c.field)
    heads: dict[tuple, MemoryRecord] = {}
    for record in (MemoryRecord.objects.live().filter(keys, confidence=Confidence.CONFIRMED)
                   .select_related("memory_class").order_by("created_at")):
        heads[(record.tenant_id, record.subject_id, record.namespace, record.field)] = record  # newest wins
    return heads


def conflict_item(conflict: Conflict) -> QueueItem:
    records = sorted(conflict.records.all(), key=lambda r: (r.created_at, r.pk))
    memory_class = records[-1].memory_class if records else class_for_namespace(
        tenant_id=conflict.tenant_id, namespace=conflict.namespace)
    masked = not reviewer_may_read(memory_class)
    proposed = records[-1] if records else None
    return QueueItem(
        type="conflict", id=str(conflict.pk), tenant=conflict.tenant, subject=conflict.subject.external_id,
        subject_name=conflict.subject.name,
        namespace=conflict.namespace, kind=proposed.kind if proposed else "", field=conflict.field,
        created_at=conflict.created_at, masked=masked, status=conflict.status,
        reasons=[{"code": "conflict", "detail": "two records of the same authority disagree; policy cannot decide"}],
        current=[_shown(r, masked) for r in records[:-1]],
        proposed_record=_shown(proposed, masked) if proposed else None,
        evidence=[{"event_id": r.source_event.external_id,
                   "text": MASK if masked else unseal_text(r.source_event.text),
                   "at": r.source_event.created_at.isoformat()} for r in records if r.source_event],
    )


def queue_items(*, reviewer: Reviewer, namespace: str | None = None, kind: str | None = None, age: str | None = None,
                item_type: str | None = None, tenant: str | None = None) -> list[QueueItem]:
    """Pending items of the tenants the reviewer reviews, oldest first. Tenant scope is in the SQL."""
    items: list[QueueItem] = []
    if item_type in (None, "", "candidate"):
        candidates = _filtered(Candidate.objects.filter(tenant_id__in=reviewer.tenant_ids,
                                                        status=Candidate.Status.REVIEW),
                               namespace=namespace, age=age, tenant=tenant)
        if kind:
            candidates = candidates.filter(kind=kind)
        rows = list(candidates.select_related("tenant", "subject", "memory_class").prefetch_related("subject__users")
                    .order_by("created_at")[:PAGE])
        heads = _live_heads(rows)
        items += [candidate_item(c, heads) for c in rows]
    if item_type in (None, "", "conflict"):
        conflicts = _filtered(Conflict.objects.filter(tenant_id__in=reviewer.tenant_ids,
                                                      status=Conflict.Status.OPEN),
                              namespace=namespace, age=age, tenant=tenant)
        if kind:
            conflicts = conflicts.filter(records__kind=kind).distinct()
        rows_c = (conflicts.select_related("tenant", "subject")
                  .prefetch_related("records__memory_class", "records__source_event", "subject__users")
                  .order_by("created_at")[:PAGE])
        items += [conflict_item(c) for c in rows_c]
    return sorted(items, key=lambda i: i.created_at)


def pending_counts(*, reviewer: Reviewer) -> list[dict[str, Any]]:
    """Per reviewed tenant: candidates waiting for review and open conflicts."""
    tenants = Tenant.objects.filter(pk__in=reviewer.tenant_ids).order_by("slug")
    candidate_counts = dict(Candidate.objects.filter(tenant_id__in=reviewer.tenant_ids, status=Candidate.Status.REVIEW)
                            .values_list("tenant_id").annotate(n=Count("pk")).values_list("tenant_id", "n"))
    conflict_counts = dict(Conflict.objects.filter(tenant_id__in=reviewer.tenant_ids, status=Conflict.Status.OPEN)
                           .values_list("tenant_id").annotate(n=Count("pk")).values_list("tenant_id", "n"))
    return [{"tenant": t, "candidates": candidate_counts.get(t.pk, 0), "conflicts": conflict_counts.get(t.pk, 0),
             "total": candidate_counts.get(t.pk, 0) + conflict_counts.get(t.pk, 0)} for t in tenants]
