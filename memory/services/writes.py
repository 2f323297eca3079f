"""The three write paths: explicit user statement, deterministic outcome, model-inferred candidate.

Each is one transactional service. Order inside every path:
permission -> namespace scope -> secret scan (before anything is written, so a secret reaches no
table, the event log included) -> memory class policy -> idempotency on source.event_id ->
precedence under a lock on the (subject, namespace, field) key -> audit -> tasks queued on commit.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.audit import audit
from memory.content import seal, seal_candidate, seal_text
from memory.errors import Conflict as ConflictError
from memory.errors import Forbidden, InvalidInput, SecretDetected
from memory.indexing import refresh_search_vectors
from memory.models import (
    Candidate,
    Confidence,
    Conflict,
    Event,
    MemoryClass,
    MemoryRecord,
    RecordStatus,
    SourceType,
)
from memory.normalise import fact_hash, payload_hash
from memory.policy import precedence
from memory.policy.classes import require_class
from memory.policy.secrets import describe, scan_payload
from memory.scope import PROPOSE, WRITE, Scope
from memory.tasks import INTERACTIVE, enqueue
from memory.tombstones import is_tombstoned

OUTCOME_SOURCE_TYPES = (SourceType.VERIFIED_OUTCOME, SourceType.SYSTEM_OF_RECORD, SourceType.ORG_RECORD)


@dataclass
class WriteResult:
    record: MemoryRecord
    created: bool
    decision: precedence.Decision | None = None
    conflict_with: list[str] = field(default_factory=list)


@dataclass
class CandidateResult:
    candidate: Candidate
    created: bool


@dataclass(frozen=True)
class RecordInput:
    """A validated write, as the API serializers and the batch importer produce it."""

    namespace: str
    kind: str
    field: str
    value: Any
    text: str
    event_id: str
    source_type: str = SourceType.EXPLICIT_USER_STATEMENT
    memory_type: str = "semantic"
    event_text: str = ""
    occurred_at: dt.datetime | None = None
    valid_from: dt.datetime | None = None
    valid_until: dt.datetime | None = None
    source_ref: dict[str, Any] | None = None

    def canonical(self) -> dict[str, Any]:
        """What makes two writes with the same event id 'the same write'."""
        return {
            "namespace": self.namespace, "kind": self.kind, "field": self.field, "value": self.value,
            "text": self.text, "source_type": self.source_type, "memory_type": self.memory_type,
            "valid_from": self.valid_from, "valid_until": self.valid_until, "source_ref": self.source_ref,
        }


def _require(scope: Scope, *permissions: str) -> None:
    if not any(scope.can(p) for p in permissions):
        raise Forbidden(
            f"This agent key lacks the {' or '.join(permissions)} scope.", code="insufficient_scope"
        )


def _require_namespace(scope: Scope, namespace: str) -> None:
    if not scope.allows_namespace(namespace):
        raise Forbidden(f"The principal may not write to namespace '{namespace}'.", code="namespace_forbidden")


def refuse_secrets(payload: dict[str, Any]) -> None:
    findings = scan_payload(payload)
    if findings:
        raise SecretDetected(describe(findings))


def lock_key(tenant_id: int, subject_id: int, namespace: str, field: str) -> None:
    """Serialise writers of one (subject, namespace, field).

    Race: two writers for the same field both read "no active record" and both insert an active
    head. Row locks cannot help when no row exists yet, so we take a transaction-scoped advisory
    lock named by the key; it is released at commit or rollback.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            [f"memory-key:{tenant_id}:{subject_id}:{namespace}:{field}"],
        )


def _event_get_or_create(*, scope: Scope, item: RecordInput, source_type: str,
                         memory_class: MemoryClass) -> tuple[Event, bool]:
    """Idempotency: one Event per (tenant, subject, event_id). Concurrent twins block on the unique
    index until the first commits, then read its row. A replay is recognised by the payload hash, never
    by the stored text, which is sealed (randomised ciphertext) when the class requires encryption."""
    digest = payload_hash(item.canonical())
    try:
        with transaction.atomic():
            event, created = Event.objects.get_or_create(
                tenant_id=scope.tenant_id, subject_id=scope.subject_id, external_id=item.event_id,
                defaults={"source_type": source_type, "payload_hash": digest, "actor": scope.actor,
                          "text": seal_text(memory_class, item.event_text or item.text),
                          "occurred_at": item.occurred_at},
            )
    except IntegrityError:
        event = Event.objects.get(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                  external_id=item.event_id)
        created = False
    if not created and event.payload_hash != digest:
        raise ConflictError(
            f"Event '{item.event_id}' was already used for a different write; use a new event id.",
            code="idempotency_conflict",
        )
    return event, created


def _live_heads(scope: Scope, namespace: str, field_name: str) -> list[MemoryRecord]:
    """The active confirmed records of one key, locked.

    Deliberately not ``for_scope``: precedence must see every head of the subject's key, including
    classes whose "allowed readers" exclude the writer, or a write could leave two active heads.
    The writer's own namespace permission was checked before this point.
    """
    return list(
        MemoryRecord.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).live()
        .filter(namespace=namespace, field=field_name, confidence=Confidence.CONFIRMED)
        .select_for_update(of=("self",)).order_by("-created_at")
    )


def new_record(*, scope: Scope, item: RecordInput, memory_class: MemoryClass, event: Event | None,
               decision: precedence.Decision, heads: list[MemoryRecord], content_hash: str,
               now: dt.datetime) -> MemoryRecord:
    """The unsaved confirmed record for ``item``, placed as the precedence decision says.

    Shared by the single write (store_confirmed) and the batch writer, so both seal content, apply
    the class TTL and link a lower-authority write to what outranks it in exactly the same way.
    """
    valid_from = item.valid_from or now
    valid_until = item.valid_until
    if valid_until is None and memory_class.default_ttl is not None:
        valid_until = valid_from + memory_class.default_ttl
    fact: dict[str, Any] = {"field": item.field, "value": item.value}
    if item.source_ref is not None:
        fact["reference"] = item.source_ref
    stored_fact, stored_text = seal(memory_class, fact, item.text)
    record = MemoryRecord(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, namespace=item.namespace, kind=item.kind,
        memory_type=item.memory_type, field=item.field, fact=stored_fact, text=stored_text,
        source_type=item.source_type, source_event=event, source_ref=item.source_ref,
        confidence=Confidence.CONFIRMED, sensitivity=memory_class.sensitivity, memory_class=memory_class,
        valid_from=valid_from, valid_until=valid_until, content_hash=content_hash,
    )
    if decision.outcome is precedence.Outcome.KEEP_INACTIVE:
        record.status = RecordStatus.SUPERSEDED
        record.status_reason = decision.reason
        record.superseded_by = min(heads, key=lambda h: precedence.rank(h.source_type))
    elif decision.outcome is precedence.Outcome.SUPERSEDE:
        record.supersedes = heads[0]
    return record


def key_in(keys: list[tuple[str, str]]) -> RawSQL:
    """``(namespace, field) IN (...)`` over two arrays: one parameter pair however many keys
    (hundreds of OR-ed Q objects take longer to compile than to run)."""
    return RawSQL('("memory_memoryrecord"."namespace", "memory_memoryrecord"."field") IN '
                  "(SELECT * FROM unnest(%s::text[], %s::text[]))",
                  ([k[0] for k in keys], [k[1] for k in keys]), output_field=BooleanField())


def retire_candidate_records(*, tenant_id: int, subject_id: int, answers: dict[tuple[str, str], MemoryRecord],
                             reason: str) -> list[MemoryRecord]:
    """Unreviewed ``confidence="candidate"`` records step aside for the confirmed record now answering their key.

    A model's inference never outranks a confirmed fact (precedence), so once an explicit statement, an
    outcome or an approved inference is active for (namespace, field), a live candidate record of that key
    must stop being served beside it. Caller holds the key locks. Returns the retired records.
    """
    if not answers:
        return []
    retired = list(MemoryRecord.objects.live().alias(key_match=key_in(sorted(answers)))
                   .filter(key_match=True, tenant_id=tenant_id, subject_id=subject_id, confidence=Confidence.CANDIDATE))
    for record in retired:
        record.status, record.status_reason = RecordStatus.SUPERSEDED, reason
        record.superseded_by = answers[(record.namespace, record.field)]
    MemoryRecord.objects.bulk_update(retired, ["status", "status_reason", "superseded_by"])
    return retired


def store_confirmed(*, scope: Scope, item: RecordInput, memory_class: MemoryClass, event: Event,
                    actor_action: str) -> WriteResult:
    """Insert a confirmed record and apply precedence. Caller holds the transaction."""
    lock_key(scope.tenant_id, scope.subject_id, item.namespace, item.field)
    content_hash = fact_hash(item.field, item.value)
    heads = _live_heads(scope, item.namespace, item.field)
    decision = precedence.decide(new_source_type=item.source_type, new_content_hash=content_hash, heads=heads)
    record = new_record(scope=scope, item=item, memory_class=memory_class, event=event, decision=decision,
                        heads=heads, content_hash=content_hash, now=timezone.now())
    conflict_with: list[str] = []
    record.save(force_insert=True)
    if decision.outcome is precedence.Outcome.SUPERSEDE:
        MemoryRecord.objects.filter(pk__in=[h.pk for h in heads]).update(
            status=RecordStatus.SUPERSEDED, superseded_by=record, status_reason=decision.reason
        )
    elif decision.outcome is precedence.Outcome.CONFLICT:
        conflict = Conflict.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                           namespace=item.namespace, field=item.field)
        conflict.records.add(record, *heads)
        conflict_with = [h.pk for h in heads]
    retired: list[MemoryRecord] = []
    if record.status == RecordStatus.ACTIVE:
        retired = retire_candidate_records(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                           answers={(item.namespace, item.field): record},
                                           reason=f"confirmed record ({item.source_type})")
    refresh_search_vectors([record.pk])
    audit(actor=scope.actor, action=actor_action, object_type="memory", object_id=record.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"event_id": event.pk, "outcome": decision.outcome.value, "reason": decision.reason,
                "superseded": [h.pk for h in heads] if decision.outcome is precedence.Outcome.SUPERSEDE else [],
                "conflict_with": conflict_with, "retired_candidates": [r.pk for r in retired]})
    if memory_class.embed:
        transaction.on_commit(lambda: enqueue("memory.tasks.embed_records", [record.pk], queue=INTERACTIVE))
    record.refresh_from_db()
    return WriteResult(record=record, created=True, decision=decision, conflict_with=conflict_with)


def _check_write(scope: Scope, item: RecordInput, *, path: str, permissions: tuple[str, ...],
                 extra: dict[str, Any] | None = None) -> MemoryClass:
    _require(scope, *permissions)
    _require_namespace(scope, item.namespace)
    refuse_secrets({**item.canonical(), "event_id": item.event_id, "event_text": item.event_text,
                    **(extra or {})})
    return require_class(tenant_id=scope.tenant_id, namespace=item.namespace, path=path)


def _replay(event: Event) -> WriteResult:
    record = MemoryRecord.objects.filter(source_event=event).order_by("created_at").first()
    if record is None:
        raise ConflictError("This event was consumed by another write path.", code="idempotency_conflict")
    return WriteResult(record=record, created=False)


@transaction.atomic
def memory_write(*, scope: Scope, item: RecordInput) -> WriteResult:
    """Explicit user statement: confirmed at once, after policy checks."""
    if item.source_type != SourceType.EXPLICIT_USER_STATEMENT:
        raise InvalidInput("POST /memories takes explicit_user_statement sources; use /outcomes otherwise.",
                           code="invalid_source_type")
    memory_class = _check_write(scope, item, path="confirmed", permissions=(WRITE,))
    return _write_confirmed(scope=scope, item=item, memory_class=memory_class, action="memory.write")


@transaction.atomic
def outcome_record(*, scope: Scope, item: RecordInput) -> WriteResult:
    """Deterministic application outcome: the verified state or a {system, id} reference, verbatim."""
    if item.source_type not in OUTCOME_SOURCE_TYPES:
        raise InvalidInput(f"An outcome's source.type is one of {', '.join(OUTCOME_SOURCE_TYPES)}.",
                           code="invalid_source_type")
    memory_class = _check_write(scope, item, path="confirmed", permissions=(WRITE,))
    return _write_confirmed(scope=scope, item=item, memory_class=memory_class, action="outcome.record")


def _write_confirmed(*, scope: Scope, item: RecordInput, memory_class: MemoryClass, action: str) -> WriteResult:
    if is_tombstoned(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                     namespace=item.namespace, field=item.field, value=None, event_ids=[item.event_id]):
        raise ConflictError("This event's content was deleted; a replay cannot recreate it.", code="tombstoned")
    event, created = _event_get_or_create(scope=scope, item=item, source_type=item.source_type,
                                          memory_class=memory_class)
    if not created:
        return _replay(event)
    return store_confirmed(scope=scope, item=item, memory_class=memory_class, event=event, actor_action=action)


@transaction.atomic
def candidate_submit(*, scope: Scope, item: RecordInput, evidence: list[dict[str, Any]] | None = None,
                     model_confidence: float | None = None) -> CandidateResult:
    """Model-inferred candidate: stored pending, never a fact; consolidation decides on commit."""
    evidence = evidence or []
    if item.source_type != SourceType.MODEL_INFERRED:
        raise InvalidInput("A candidate's source.type is model_inferred.", code="invalid_source_type")
    memory_class = _check_write(scope, item, path="candidate", permissions=(PROPOSE, WRITE),
                                extra={"evidence": evidence})
    if is_tombstoned(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                     namespace=item.namespace, field=item.field, value=None, event_ids=[item.event_id]):
        raise ConflictError("This event's content was deleted; a replay cannot recreate it.", code="tombstoned")
    event, created = _event_get_or_create(scope=scope, item=item, source_type=SourceType.MODEL_INFERRED,
                                          memory_class=memory_class)
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
    transaction.on_commit(lambda: enqueue("memory.tasks.consolidate_candidate", candidate.pk, queue=INTERACTIVE))
    return CandidateResult(candidate=candidate, created=True)
