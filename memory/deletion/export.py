"""GET /api/v1/export and /me/export: everything held about the scope's subject that the scope may read, as JSON.

Records come through the scoped query with their provenance (source event) and history links,
unsealed. Every other table that holds rows about a subject (threads, events, summaries,
checkpoints, retrieval logs, and whatever later areas add) is found generically: any model with a
``subject`` foreign key to memory.Subject, filtered by tenant and subject in SQL. Derived columns
(embeddings, full-text vectors) are left out: they are recomputed from the content exported here.

Every section follows the reader's grant (memory/scope.py), the same rule as the section's own
surface: candidates by namespace and class readers, like records; events only as the source of a
record or candidate the reader sees; thread state with a ``threads`` grant; retrieval logs entry
by entry; any table with a ``namespace`` column by namespace. A table that no grant names is
exported to unrestricted principals only. The person's own export (/me/) is unrestricted.
"""

from __future__ import annotations

import json
from typing import Any

from django.apps import apps
from django.contrib.postgres.search import SearchVectorField
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from pgvector.django import VectorField

from memory.content import unseal_candidate, unseal_text
from memory.deletion.quoting import may_quote
from memory.models import AuditEntry, Candidate, Event, MemoryRecord, Subject
from memory.namespaces import under_any_q
from memory.records.presenters import record_payload
from memory.retrieval.models import RetrievalLog
from memory.retrieval.selectors import logs_with_record_texts, visible_log_fields
from memory.scope import READ, THREADS, Scope

# Friendly section names for the areas' tables; any other subject table appears as "<app>.<model>".
SECTION_NAMES = {
    "threads.thread": "threads", "threads.threadevent": "thread_events", "threads.summary": "summaries",
    "threads.checkpoint": "checkpoints", "threads.toolcall": "tool_calls", "retrieval.retrievallog": "retrieval_logs",
}
HANDLED = {MemoryRecord, Candidate, Event, AuditEntry}
# Generic sections whose rows a reserved grant covers, by app.
APP_GRANTS = {"threads": THREADS}
DERIVED = (VectorField, SearchVectorField)


def _subject_models() -> list[type[models.Model]]:
    found = []
    for model in apps.get_models():
        if model in HANDLED or model._meta.app_label in {"deletion"}:
            continue
        for f in model._meta.concrete_fields:
            if isinstance(f, models.ForeignKey) and f.related_model is Subject and f.name == "subject":
                found.append(model)
                break
    return sorted(found, key=lambda m: m._meta.label_lower)


def _rows(model: type[models.Model], scope: Scope) -> list[dict[str, Any]]:
    fields = [f.attname for f in model._meta.concrete_fields if not isinstance(f, DERIVED)]
    qs = model._default_manager.filter(subject_id=scope.subject_id)  # type: ignore[attr-defined]
    if "tenant" in fields or "tenant_id" in fields:
        qs = qs.filter(tenant_id=scope.tenant_id)
    if not scope.unrestricted:
        grant = APP_GRANTS.get(model._meta.app_label)
        if "namespace" in fields:
            qs = qs.filter(under_any_q(scope.namespaces or ()))
        elif grant is not None:
            if not scope.allows_namespace(grant):
                return []
        elif model is not RetrievalLog:
            return []
    rows = list(qs.order_by("pk").values(*fields))
    if model is RetrievalLog:
        rows = [visible_log_fields(scope, row) for row in rows]
        shown = logs_with_record_texts(tenant_id=scope.tenant_id, logs=[row["candidates"] for row in rows])
        rows = [{**row, "candidates": entries} for row, entries in zip(rows, shown, strict=True)]
    return rows


def _candidates(scope: Scope) -> QuerySet[Candidate]:
    """The subject's candidates the scope may read: the namespace grant and the class's readers, as for records."""
    qs = Candidate.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).filter(
        Q(memory_class__isnull=True) | Q(memory_class__allowed_readers__contains=[scope.reader_role]))
    return qs if scope.unrestricted else qs.filter(under_any_q(scope.namespaces or ()))


def _events(scope: Scope, records: QuerySet[MemoryRecord], candidates: QuerySet[Candidate]) -> QuerySet[Event]:
    """Events are what a record or candidate came from: the reader sees those of what it sees (an
    unrestricted reader also those of nothing any more, e.g. left by a failed write path)."""
    shown = Q(pk__in=records.values("source_event_id")) | Q(pk__in=candidates.values("source_event_id"))
    if scope.unrestricted:
        shown |= ~Exists(MemoryRecord.objects.filter(source_event_id=OuterRef("pk"))) & ~Exists(
            Candidate.objects.filter(source_event_id=OuterRef("pk")))
    return Event.objects.filter(shown, tenant_id=scope.tenant_id, subject_id=scope.subject_id)


def subject_export(*, scope: Scope, leave_out: frozenset[str] = frozenset(),
                   quoting: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Everything about the scope's subject, but the generic sections named in ``leave_out`` (shown empty). With
    ``quoting`` (a deletion's read check), only the records and events that could quote one of those strings."""
    scope.require(READ)
    records = (MemoryRecord.objects.for_scope(scope).select_related("memory_class", "source_event", "subject")
               .order_by("created_at", "pk"))
    shown_records = records if quoting is None else may_quote(
        records, quoting, text=("text", "source_event__text"), json_fields=("fact", "source_ref"))
    out_records = []
    for r in shown_records:
        payload: dict[str, Any] = dict(record_payload(r))
        if r.source_event is not None:
            payload["provenance"] = {"event_id": r.source_event.external_id, "source_type": r.source_event.source_type,
                                     "text": unseal_text(r.source_event.text),
                                     "occurred_at": r.source_event.occurred_at,
                                     "recorded_at": r.source_event.created_at}
        out_records.append(payload)
    candidates = []
    for c in _candidates(scope).order_by("created_at"):
        fact, text, evidence = unseal_candidate(c)
        candidates.append({"candidate_id": c.id, "namespace": c.namespace.split("/"), "kind": c.kind, "fact": fact,
                           "text": text, "status": c.status, "evidence": evidence,
                           "model_confidence": c.model_confidence, "created_at": c.created_at})
    events_shown = _events(scope, records, _candidates(scope))
    if quoting is not None:
        events_shown = may_quote(events_shown, quoting, text=("text",))
    events = [{**e, "text": unseal_text(e["text"])} for e in events_shown.order_by("created_at")
              .values("id", "external_id", "source_type", "text", "occurred_at", "created_at")]
    body: dict[str, Any] = {
        "subject_id": scope.subject_external_id,
        # The name pages call the subject by is personal data too ("" when none was set).
        "display_name": Subject.objects.filter(pk=scope.subject_id).values_list("display_name", flat=True).first()
        or "",
        "exported_at": timezone.now(),
        "records": out_records, "candidates": candidates, "events": events,
    }
    for model in _subject_models():
        name = SECTION_NAMES.get(model._meta.label_lower, model._meta.label_lower)
        body[name] = [] if name in leave_out else _rows(model, scope)
    for name in ("threads", "summaries", "checkpoints", "retrieval_logs"):
        body.setdefault(name, [])
    return body


def export_json(*, scope: Scope) -> str:
    return json.dumps(subject_export(scope=scope), cls=DjangoJSONEncoder, ensure_ascii=False, indent=2)
