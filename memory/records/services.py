"""Writes of long-term memory: explicit statements, outcomes, batches, corrections and candidates.

Every service that creates or changes a record hands its items to the write gate
(memory/records/gate.py) and returns the gate's ``WriteResult``; what differs between them is only
what they check before (the source type a path takes, that a corrected record is active) and what
they do after (a correction marks the summaries that cite the old record stale). A model-inferred
candidate is not a record: it passes the gate's checks (permission, namespace, secrets, class
policy, idempotency) and is stored pending, for consolidation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.audit import audit
from memory.content import seal_candidate, unseal
from memory.errors import Conflict as ConflictError
from memory.errors import InvalidInput, NotFound
from memory.ids import new_event_id
from memory.models import Candidate, Event, MemoryRecord, RecordStatus, SourceType
from memory.normalise import fact_hash, payload_hash
from memory.queues import INTERACTIVE, enqueue
from memory.records.gate import (
    MAX_BATCH,
    ItemResult,
    RecordInput,
    Write,
    WriteResult,
    check_item,
    claim_events,
    reused_error,
    tombstoned_error,
    write_one,
    write_records,
)
from memory.scope import PROPOSE, READ, WRITE, Scope
from memory.threads.models import Summary, ThreadEvent
from memory.threads.services.summaries import mark_stale, summaries_over
from memory.tombstones import is_tombstoned

OUTCOME_SOURCE_TYPES = (SourceType.VERIFIED_OUTCOME, SourceType.SYSTEM_OF_RECORD, SourceType.ORG_RECORD)
# Quoted text shorter than this is too common to tie a summary to a corrected record ("yes", "1").
MIN_QUOTE_CHARS = 4

__all__ = ["MAX_BATCH", "OUTCOME_SOURCE_TYPES", "ItemResult", "RecordInput", "WriteResult", "candidate_submit",
           "memory_correct", "memory_write", "memory_write_batch", "outcome_record"]


def _action_for(item: RecordInput) -> str:
    """The audit action of an agent's confirmed write, which also says the source types it takes."""
    if item.source_type == SourceType.EXPLICIT_USER_STATEMENT:
        return "memory.write"
    if item.source_type in OUTCOME_SOURCE_TYPES:
        return "outcome.record"
    raise InvalidInput(f"A record's source.type is explicit_user_statement or one of "
                       f"{', '.join(OUTCOME_SOURCE_TYPES)}; use /candidates for model_inferred.",
                       code="invalid_source_type")


@transaction.atomic
def memory_write(*, scope: Scope, item: RecordInput) -> WriteResult:
    """Explicit user statement: confirmed at once, after the gate."""
    if item.source_type != SourceType.EXPLICIT_USER_STATEMENT:
        raise InvalidInput("POST /memories takes explicit_user_statement sources; use /outcomes otherwise.",
                           code="invalid_source_type")
    return write_one(scope=scope, write=Write(item=item, action="memory.write"))


@transaction.atomic
def outcome_record(*, scope: Scope, item: RecordInput) -> WriteResult:
    """Deterministic application outcome: the verified state or a {system, id} reference, verbatim."""
    if item.source_type not in OUTCOME_SOURCE_TYPES:
        raise InvalidInput(f"An outcome's source.type is one of {', '.join(OUTCOME_SOURCE_TYPES)}.",
                           code="invalid_source_type")
    return write_one(scope=scope, write=Write(item=item, action="outcome.record"))


@transaction.atomic
def memory_write_batch(*, scope: Scope, items: list[RecordInput], embed_now: bool = False) -> list[ItemResult]:
    """Up to MAX_BATCH explicit statements or outcomes; one result per item, in order, each item
    through the gate exactly as a single write. A batch is never half-written: items that fail a
    check are left out, the others are written in this one transaction."""
    scope.require(WRITE)
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"A batch holds at most {MAX_BATCH} items.", code="batch_too_large")
    results: list[ItemResult | None] = [None] * len(items)
    writes: list[tuple[int, Write]] = []
    for index, item in enumerate(items):
        try:
            writes.append((index, Write(item=item, action=_action_for(item))))
        except InvalidInput as exc:
            results[index] = ItemResult(index=index, error=exc)
    written = write_records(scope=scope, writes=[w for _, w in writes], embed_now=embed_now)
    for (index, _), result in zip(writes, written, strict=True):
        result.index = index
        results[index] = result
    return [r for r in results if r is not None]


@dataclass
class CorrectionResult:
    record: MemoryRecord
    previous: MemoryRecord
    created: bool = True


def _correction_replay(scope: Scope, item: RecordInput) -> CorrectionResult | None:
    """The correction already made under ``item.event_id`` (a client retrying a lost answer), or None."""
    event = Event.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                 external_id=item.event_id).first()
    if event is None:
        return None
    record = MemoryRecord.objects.filter(source_event=event).order_by("created_at").first()
    if event.payload_hash != payload_hash(item.canonical()) or record is None or record.supersedes_id is None:
        raise reused_error(item.event_id)
    return CorrectionResult(record=record, previous=MemoryRecord.objects.get(pk=record.supersedes_id), created=False)


@transaction.atomic
def memory_correct(*, scope: Scope, memory_id: str, value: Any, text: str = "",
                   event_text: str = "", event_id: str | None = None) -> CorrectionResult:
    """A new explicit statement that supersedes ``memory_id``, through the write gate like any write
    (an agent needs a class that takes confirmed writes; the person on /me/ corrects any record they
    read). Summaries that cite the old record go stale and are regenerated by the threads area.

    ``event_id`` is the idempotency key: the same id and correction return the correction already made
    (``created`` False), even though the old record is no longer active; another correction is a 409.

    Needs ``read`` as well as ``write``: the new record carries over what the correction leaves out (the
    old value, the field, the namespace), which a write-only key must not learn."""
    scope.require(WRITE)
    scope.require(READ)
    old = (MemoryRecord.objects.for_scope(scope).filter(pk=memory_id, subject_id=scope.subject_id)
           .select_related("source_event").first())
    if old is None:
        raise NotFound(f"No memory '{memory_id}' in this scope.")
    if value is None and not text:
        raise InvalidInput("Give the corrected value or text.")
    old_fact, old_text = unseal(old)
    if value is None:
        value = old_fact.get("value")
    item = RecordInput(namespace=old.namespace, kind=old.kind, field=old.field, value=value,
                       text=text or f"{old.field}: {value}", event_id=event_id or new_event_id(),
                       source_type=SourceType.EXPLICIT_USER_STATEMENT, memory_type=old.memory_type,
                       event_text=event_text or text)
    if event_id and (replay := _correction_replay(scope, item)) is not None:
        return replay
    if old.status != RecordStatus.ACTIVE:
        raise ConflictError(f"Only an active memory can be corrected; this one is {old.status}.", code="not_active")
    result = write_one(scope=scope, write=Write(item=item, action="memory.correct", corrects=old.pk,
                                                audit={"corrects": old.pk}))
    if result.record.status != RecordStatus.ACTIVE:  # rolls the whole correction back
        raise ConflictError("A higher-authority record stands for this field; the correction cannot replace it.",
                            code="correction_outranked")
    _summaries_follow_correction(scope=scope, old=old, old_text=old_text)
    old.refresh_from_db()
    return CorrectionResult(record=result.record, previous=old, created=result.created)


def _summaries_follow_correction(*, scope: Scope, old: MemoryRecord, old_text: str) -> None:
    """Summaries that cite the corrected record (cover its source thread event, or quote its sentence)
    go stale now and are regenerated by the threads area's task on commit."""
    event_ids = [old.source_event.external_id] if old.source_event else []
    events = ThreadEvent.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, pk__in=event_ids)
    quoting = Q(text__icontains=old_text) if len(old_text.strip()) >= MIN_QUOTE_CHARS else Q(pk__in=[])
    citing = Summary.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).filter(
        Q(pk__in=summaries_over(events).values("pk")) | quoting)
    mark_stale(citing, reason=f"memory {old.pk} was corrected", blank=False)


@dataclass
class CandidateResult:
    candidate: Candidate
    created: bool


@transaction.atomic
def candidate_submit(*, scope: Scope, item: RecordInput, evidence: list[dict[str, Any]] | None = None,
                     model_confidence: float | None = None) -> CandidateResult:
    """Model-inferred candidate: the gate's checks, then stored pending, never a fact; consolidation
    decides on commit."""
    scope.require(PROPOSE, WRITE)
    evidence = evidence or []
    if item.source_type != SourceType.MODEL_INFERRED:
        raise InvalidInput("A candidate's source.type is model_inferred.", code="invalid_source_type")
    memory_class = check_item(scope, item, path="candidate", extra={"evidence": evidence})
    if is_tombstoned(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                     namespace=item.namespace, field=item.field, value=None, event_ids=[item.event_id]):
        raise tombstoned_error()
    event, created = claim_events(scope, [(item, memory_class)])[0]
    if not created and event.payload_hash != payload_hash(item.canonical()):
        raise reused_error(item.event_id)
    if not created:
        existing = Candidate.objects.filter(source_event=event).first()
        if existing is None:
            raise ConflictError("This event was consumed by another write path.", code="idempotency_conflict")
        return CandidateResult(candidate=existing, created=False)
    now = timezone.now()
    quotes = [{"event_id": item.event_id, "text": item.event_text or item.text,
               "at": (item.occurred_at or now).isoformat()}, *evidence]
    fact, text, quotes = seal_candidate(memory_class, {"field": item.field, "value": item.value}, item.text, quotes)
    candidate = Candidate.objects.create(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, namespace=item.namespace, kind=item.kind,
        memory_type=item.memory_type, field=item.field, fact=fact,
        text=text, source_event=event, evidence=quotes, model_confidence=model_confidence,
        memory_class=memory_class, content_hash=fact_hash(item.field, item.value),
    )
    audit(actor=scope.actor, action="candidate.submit", object_type="candidate", object_id=candidate.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id, data={"event_id": event.pk})
    transaction.on_commit(lambda: enqueue("memory.consolidation.tasks.consolidate_candidate", candidate.pk,
                                          queue=INTERACTIVE))
    return CandidateResult(candidate=candidate, created=True)
