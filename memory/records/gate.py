"""The write gate: every path that creates or changes a memory record goes through ``write_records``.

The paths are explicit statements (POST /memories), outcomes (POST /outcomes), batches (POST
/memories/batch, ``import_memories``), corrections (the API and /me/), reviewers' approvals (as
proposed, or edited) and the candidate records consolidation keeps. Each hands in one ``Write`` per
item; the gate applies the same steps, in this order, to every item and answers each with the
same ``WriteResult`` (in an ``ItemResult`` that carries its index or its error):

1. permission: the scope's ``write`` (once per call: a refusal refuses the whole call);
2. namespace: the grant (key ∩ token) must reach the item's namespace;
3. secrets: every string of the item, keys included, before anything is written;
4. class policy: the class of the longest matching prefix, and what it lets this writer store;
5. idempotency: a deleted source event (or, for approvals, deleted content) is never written
   again, and one ``Event`` per ``source.event_id`` (a replay answers with the first record);
6. precedence: under the (subject, namespace, field) locks, items decided in the order they came;
7. audit: one row per record written, in the same transaction;
8. seal: a class that requires encryption stores ciphertext only, in the record and its event;
9. task: the embedding is queued on commit (or computed in the call when a batch asks for it).

Items that fail steps 2-5 get their error and are not written; the others are written together.
Only the database work is batched: classes are loaded once, tombstones, events, heads and replays
are one query each, the locks one statement, and records and audit rows are written by COPY. So a
single write is a batch of one, and a batch of 500 is checked exactly like 500 single writes.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now
from django.utils import timezone

from memory import locks, metrics
from memory.content import seal, seal_text
from memory.db import bulk
from memory.embedder import get_embedder
from memory.errors import Conflict as ConflictError
from memory.errors import EngramError
from memory.models import (
    AuditEntry,
    Confidence,
    Conflict,
    Event,
    MemoryClass,
    MemoryRecord,
    MemoryType,
    RecordStatus,
    SourceType,
    Subject,
    Tombstone,
)
from memory.normalise import fact_hash, payload_hash
from memory.policy import precedence
from memory.policy.classes import check_class, class_for_namespace, pick_class
from memory.policy.secrets import refuse_secrets
from memory.queues import embedding_queue, enqueue
from memory.records.indexing import record_search_vector_sql, schedule_context
from memory.retrieval.centroid import vectors_written
from memory.scope import WRITE, Scope
from memory.tombstones import event_hash, is_tombstoned, subject_hash

MAX_BATCH = 500
_EMBEDDING_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-embed")


@dataclass(frozen=True)
class RecordInput:
    """A validated write, as the API serializers, the importer and the services produce it."""

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


@dataclass(frozen=True)
class Write:
    """One item through the gate, and what its path adds."""

    item: RecordInput
    action: str  # the audit action: memory.write, outcome.record, memory.correct, memory.approve, ...
    # The source event when it exists already (an approved or retained candidate's); else one is
    # claimed for item.event_id (step 5).
    event: Event | None = None
    confidence: str = Confidence.CONFIRMED
    corrects: str | None = None  # the record this write corrects: it is superseded whatever precedence found
    tombstone_value: bool = False  # also refuse a deleted value of this key (approvals re-state content)
    tombstone_events: tuple[str, ...] = ()  # other source events whose deletion refuses the write
    audit: Mapping[str, Any] = field(default_factory=dict)  # ids the audit row adds (candidate id, edited)


@dataclass
class WriteResult:
    """What every write path answers: the record, whether this call created it (False: a replay of
    the same event), how precedence placed it, and the records it is in conflict with."""

    record: MemoryRecord
    created: bool
    decision: precedence.Decision | None = None  # None for a replay
    conflict_with: list[str] = field(default_factory=list)


@dataclass
class ItemResult:
    index: int
    written: WriteResult | None = None
    error: EngramError | None = None

    @property
    def record(self) -> MemoryRecord | None:
        return self.written.record if self.written is not None else None

    @property
    def status(self) -> str:
        if self.error is not None or self.written is None:
            return "error"
        return "created" if self.written.created else "existing"


@dataclass
class _Pending:
    result: ItemResult
    write: Write
    memory_class: MemoryClass
    digest: str
    event: Event | None = None
    twin_of: _Pending | None = None  # an earlier item of this call with the same event id
    audit: dict[str, Any] = field(default_factory=dict)

    @property
    def item(self) -> RecordInput:
        return self.write.item


def class_path(scope: Scope, item: RecordInput) -> str:
    """Which of the class's permissions this writer needs (memory/policy/classes.py WRITE_PATH_NEEDS):
    a person correcting their own memory is not the model; a model's inference, even approved by a
    reviewer or kept by consolidation, needs a class that takes candidates."""
    if scope.reader_role == "owner":
        return "owner"
    return "candidate" if item.source_type == SourceType.MODEL_INFERRED else "confirmed"


def check_item(scope: Scope, item: RecordInput, *, path: str, classes: dict[str, MemoryClass] | None = None,
               scan_cache: dict[str, list[str]] | None = None, extra: dict[str, Any] | None = None) -> MemoryClass:
    """Steps 2-4 for one item: namespace grant, secrets, class policy. Raises the item's error.

    Shared with candidate submission, whose item becomes a Candidate instead of a record."""
    scope.require_namespace(item.namespace)
    refuse_secrets({**item.canonical(), "event_id": item.event_id, "event_text": item.event_text, **(extra or {}),
                    **read_together(item.text, item.value)}, cache=scan_cache)
    memory_class = (pick_class(classes, item.namespace) if classes is not None
                    else class_for_namespace(tenant_id=scope.tenant_id, namespace=item.namespace))
    return check_class(memory_class, namespace=item.namespace, path=path)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def _glued(parts: list[str]) -> str:
    # Joined with nothing between, so a token cut in two reads whole again; but two numbers are not run
    # together (two phone numbers would read as a card number now and then).
    out = parts[0]
    for part in parts[1:]:
        out += ("\n" if out[-1:].isdigit() and part[:1].isdigit() else "") + part
    return out


def read_together(text: str, value: Any) -> dict[str, str]:
    """The record's text and its fact's strings as one, both ways round, for the secret scan: a secret
    split between the text and the fact (or two strings of the fact) is found whole. Strings the text
    already holds (the default `field: value` text) add nothing and are left out, so a plain record
    costs no extra scan."""
    parts = [text, *(s for s in _strings(value) if s and s not in text)]
    parts = [p for p in parts if p]
    if len(parts) < 2:
        return {}
    return {"text+fact": _glued(parts), "fact+text": _glued(parts[::-1])}


def tombstoned_error() -> ConflictError:
    return ConflictError("This content or its source event was deleted; it cannot be written again.",
                         code="tombstoned")


def key_lock_name(tenant_id: int, subject_id: int, namespace: str, field_name: str) -> str:
    return f"memory-key:{tenant_id}:{subject_id}:{namespace}:{field_name}"


def lock_record_keys(tenant_id: int, subject_id: int, keys: Iterable[tuple[str, str]]) -> None:
    """Serialise the writers of each (subject, namespace, field).

    Race: two writers of one key both read "no active record" and both insert an active head. Row
    locks cannot help when no row exists yet, so each key's name is locked (memory/locks.py).
    """
    locks.lock(key_lock_name(tenant_id, subject_id, ns, f) for ns, f in keys)


def key_in(keys: list[tuple[str, str]]) -> RawSQL:
    """``(namespace, field) IN (...)`` over two arrays: one parameter pair however many keys
    (hundreds of OR-ed Q objects take longer to compile than to run)."""
    return RawSQL('("memory_memoryrecord"."namespace", "memory_memoryrecord"."field") IN '
                  "(SELECT * FROM unnest(%s::text[], %s::text[]))",
                  ([k[0] for k in keys], [k[1] for k in keys]), output_field=BooleanField())


def write_one(*, scope: Scope, write: Write) -> WriteResult:
    """The gate for one item; its error is raised (the caller's transaction rolls back)."""
    result = write_records(scope=scope, writes=[write])[0]
    if result.error is not None:
        raise result.error
    assert result.written is not None  # an item without an error was written or replayed
    return result.written


@transaction.atomic
def write_records(*, scope: Scope, writes: list[Write], embed_now: bool = False) -> list[ItemResult]:
    """The gate for many items; one result per item, in order (see the module docstring).

    ``embed_now`` computes the new records' embeddings in this call, in one batched model call that
    overlaps the database work, and inserts them with the rows; otherwise one task fills them."""
    scope.require(WRITE)
    classes = {c.namespace_prefix: c for c in MemoryClass.objects.filter(tenant_id=scope.tenant_id)}
    scan_cache: dict[str, list[str]] = {}
    results = [ItemResult(index=i) for i in range(len(writes))]
    pending: list[_Pending] = []
    for result, write in zip(results, writes, strict=True):
        try:
            memory_class = check_item(scope, write.item, path=class_path(scope, write.item), classes=classes,
                                      scan_cache=scan_cache)
        except EngramError as exc:
            result.error = exc
            continue
        pending.append(_Pending(result=result, write=write, memory_class=memory_class,
                                digest=payload_hash(write.item.canonical())))
    # The model call overlaps the database work below, which mostly waits on PostgreSQL and so leaves
    # the GIL to torch. It starts after the checks: overlapping the CPU-bound secret scan instead made
    # both slower (GIL contention). Only texts that passed the checks reach the model.
    vectors: Future[list[list[float]]] | None = None
    positions = {p.result.index: n for n, p in enumerate(pending)}
    if embed_now and pending:
        vectors = _EMBEDDING_POOL.submit(get_embedder().embed, [p.item.text for p in pending])
    pending = _drop_tombstoned(scope, pending)
    fresh = _claim_events(scope, pending)
    if fresh:
        _store(scope, fresh, vectors=vectors, positions=positions)
    for p in pending:  # a repeated event id in one call gets the first item's answer, as a replay
        if p.twin_of is not None and p.result.error is None:
            p.result.error, p.result.written = p.twin_of.result.error, p.twin_of.result.written
    return results


# --- step 5: idempotency -----------------------------------------------------------------------------


def _source_event_ids(p: _Pending) -> list[str]:
    own = p.write.event.external_id if p.write.event is not None else p.item.event_id
    return [own, *p.write.tombstone_events]


def _any_event_tombstoned(scope: Scope, event_ids: list[str]) -> bool:
    """is_tombstoned(event_ids=...) for a whole call as one ``?|`` (any element) test on the hashes,
    instead of 500 OR-ed containment tests (which cost more to build than to run)."""
    return Tombstone.objects.filter(
        tenant_id=scope.tenant_id, subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id),
        expires_at__gt=Now(), event_hashes__has_any_keys=[event_hash(e) for e in event_ids],
    ).exists()


def _drop_tombstoned(scope: Scope, pending: list[_Pending]) -> list[_Pending]:
    by_value = any(p.write.tombstone_value for p in pending)
    event_ids = [e for p in pending for e in _source_event_ids(p)]
    if not by_value and (not event_ids or not _any_event_tombstoned(scope, event_ids)):
        return pending
    kept = []
    for p in pending:  # rare: find which items replay deleted content
        if is_tombstoned(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                         namespace=p.item.namespace, field=p.item.field,
                         value=p.item.value if p.write.tombstone_value else None, event_ids=_source_event_ids(p)):
            p.result.error = tombstoned_error()
        else:
            kept.append(p)
    return kept


def claim_events(scope: Scope, claims: list[tuple[RecordInput, MemoryClass]], *,
                 digests: list[str] | None = None) -> list[tuple[Event, bool]]:
    """One Event per (tenant, subject, event_id): the items' events, and whether this call created each.

    New ones are inserted in one statement with ON CONFLICT DO NOTHING, which waits for a concurrent
    twin's commit; the rows it inserted come back from RETURNING, and only the others (replays, or a
    twin's) are read, by a later statement that sees the twin's committed row. The text is sealed by
    the item's class (step 8). A replay is recognised by the payload hash, never by the stored text
    (sealed text is randomised). The callers pass distinct event ids, and may pass the items'
    payload hashes when they have them already."""
    now = timezone.now()
    hashes = digests if digests is not None else [payload_hash(item.canonical()) for item, _ in claims]
    ours = [Event(tenant_id=scope.tenant_id, subject_id=scope.subject_id, external_id=item.event_id,
                  source_type=item.source_type, payload_hash=digest, actor=scope.actor,
                  text=seal_text(memory_class, item.event_text or item.text), occurred_at=item.occurred_at,
                  created_at=now)
            for (item, memory_class), digest in zip(claims, hashes, strict=True)]
    if not ours:
        return []
    # Arrays instead of a VALUES list: ten parameters however many events (bulk_create's 5,000
    # placeholders cost more to compose than to run), and no second read of the rows just written.
    # Inserted in event id order: two calls claiming the same ids in different orders would otherwise
    # each wait on the other's uncommitted unique-index entry (a deadlock).
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_event (id, tenant_id, subject_id, external_id, source_type, payload_hash, text, "
            "occurred_at, created_at, actor) "
            "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::timestamptz[], %s::timestamptz[], %s::text[]) ORDER BY 4 "
            "ON CONFLICT DO NOTHING RETURNING external_id",
            [[e.pk for e in ours], [e.tenant_id for e in ours], [e.subject_id for e in ours],
             [e.external_id for e in ours], [e.source_type for e in ours], [e.payload_hash for e in ours],
             [e.text for e in ours], [e.occurred_at for e in ours], [e.created_at for e in ours],
             [e.actor for e in ours]])
        inserted = {row[0] for row in cursor.fetchall()}
    stored = {e.external_id: e for e in ours if e.external_id in inserted}
    for e in ours:  # saved rows now, as bulk_create would leave them
        e._state.adding, e._state.db = False, connection.alias
    others = [e.external_id for e in ours if e.external_id not in inserted]
    if others:
        stored.update((e.external_id, e) for e in Event.objects.filter(
            tenant_id=scope.tenant_id, subject_id=scope.subject_id, external_id__in=others))
    return [(stored[mine.external_id], stored[mine.external_id].pk == mine.pk) for mine in ours]


def reused_error(event_id: str) -> ConflictError:
    return ConflictError(f"Event '{event_id}' was already used for a different write; use a new event id.",
                         code="idempotency_conflict")


def _claim_events(scope: Scope, pending: list[_Pending]) -> list[_Pending]:
    """Step 5's event half. Returns the items whose event this call created (or that came with their
    event); replays get the record of the first write, reuses with other content 409."""
    first_in_call: dict[str, _Pending] = {}
    claims: list[_Pending] = []
    fresh: list[_Pending] = []
    for p in pending:
        if p.write.event is not None:
            p.event = p.write.event
            fresh.append(p)
            continue
        twin = first_in_call.get(p.item.event_id)
        if twin is None:
            first_in_call[p.item.event_id] = p
            claims.append(p)
        elif twin.digest != p.digest:
            p.result.error = reused_error(p.item.event_id)
        else:
            p.twin_of = twin
    replays: dict[str, _Pending] = {}
    claimed = claim_events(scope, [(p.item, p.memory_class) for p in claims], digests=[p.digest for p in claims])
    for p, (event, created) in zip(claims, claimed, strict=True):
        p.event = event
        if created:
            fresh.append(p)
        elif event.payload_hash != p.digest:
            p.result.error = reused_error(p.item.event_id)
        else:
            replays[event.pk] = p
    _replay(replays)
    return fresh


def _replay(replays: dict[str, _Pending]) -> None:
    if not replays:
        return
    found: dict[str, MemoryRecord] = {}
    for record in (MemoryRecord.objects.filter(source_event_id__in=list(replays))
                   .select_related("memory_class", "source_event", "subject").order_by("-created_at")):
        found[record.source_event_id] = record  # type: ignore[index]  # the oldest wins
    for event_id, p in replays.items():
        if event_id in found:
            p.result.written = WriteResult(record=found[event_id], created=False)
        else:
            p.result.error = ConflictError("This event was consumed by another write path.",
                                           code="idempotency_conflict")


# --- steps 6-9: precedence, audit, seal, task --------------------------------------------------------


def new_record(*, scope: Scope, item: RecordInput, memory_class: MemoryClass, event: Event | None,
               decision: precedence.Decision, heads: list[MemoryRecord], content_hash: str,
               now: dt.datetime, confidence: str = Confidence.CONFIRMED) -> MemoryRecord:
    """The unsaved record for ``item``, sealed by its class, with the class TTL, placed as the
    precedence decision says (a lower-authority write is linked to what outranks it)."""
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
        confidence=confidence, sensitivity=memory_class.sensitivity, memory_class=memory_class,
        valid_from=valid_from, valid_until=valid_until, content_hash=content_hash,
    )
    if decision.outcome is precedence.Outcome.KEEP_INACTIVE:
        record.status = RecordStatus.SUPERSEDED
        record.status_reason = decision.reason
        record.superseded_by = min(heads, key=lambda h: precedence.rank(h.source_type))
    elif decision.outcome is precedence.Outcome.SUPERSEDE:
        record.supersedes = heads[0]
    return record


def _retire_candidate_records(*, tenant_id: int, subject_id: int,
                             answers: dict[tuple[str, str], MemoryRecord]) -> list[MemoryRecord]:
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
        answer = answers[(record.namespace, record.field)]
        record.status, record.superseded_by = RecordStatus.SUPERSEDED, answer
        record.status_reason = f"confirmed record ({answer.source_type})"
    MemoryRecord.objects.bulk_update(retired, ["status", "status_reason", "superseded_by"])
    return retired


def _heads(scope: Scope, fresh: list[_Pending]) -> dict[tuple[str, str, str], list[MemoryRecord]]:
    """The live records of every key written, per confidence, locked, newest first.

    Deliberately not ``for_scope``: precedence must see every head of the subject's key, including
    classes whose "allowed readers" exclude the writer, or a write could leave two active heads. The
    writer's namespace grant was checked at step 2. Confirmed records are precedence heads; a
    candidate record only ever replaces older candidate records of its key."""
    keys = sorted({(p.item.namespace, p.item.field) for p in fresh})
    heads: dict[tuple[str, str, str], list[MemoryRecord]] = defaultdict(list)
    for head in (MemoryRecord.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).live()
                 .alias(key_match=key_in(keys)).filter(key_match=True)
                 .select_for_update(of=("self",)).order_by("-created_at")):
        heads[(head.namespace, head.field, head.confidence)].append(head)
    return heads


def _store(scope: Scope, fresh: list[_Pending], *, vectors: Future[list[list[float]]] | None,
           positions: dict[int, int]) -> None:
    lock_record_keys(scope.tenant_id, scope.subject_id, {(p.item.namespace, p.item.field) for p in fresh})
    heads = _heads(scope, fresh)
    subject = Subject.objects.get(pk=scope.subject_id)
    now = timezone.now()
    records: list[MemoryRecord] = []
    superseded_heads: dict[str, MemoryRecord] = {}
    conflicts: list[tuple[_Pending, MemoryRecord, list[MemoryRecord]]] = []
    for p in fresh:
        item, confidence = p.item, p.write.confidence
        key = (item.namespace, item.field, confidence)
        current = heads[key]
        content_hash = fact_hash(item.field, item.value)
        decision = precedence.decide(new_source_type=item.source_type, new_content_hash=content_hash,
                                     heads=current)
        record = new_record(scope=scope, item=item, memory_class=p.memory_class, event=p.event, decision=decision,
                            heads=current, content_hash=content_hash, now=now, confidence=confidence)
        if p.write.corrects is not None:
            record.supersedes_id = p.write.corrects
        record.subject = subject  # the loaded row, so serialising the results does not fetch it per item
        superseded: list[str] = []
        conflict_with: list[str] = []
        if decision.outcome is precedence.Outcome.SUPERSEDE:
            for head in current:
                head.status, head.superseded_by, head.status_reason = (
                    RecordStatus.SUPERSEDED, record, decision.reason)
                superseded_heads[head.pk] = head
            superseded = [h.pk for h in current]
            heads[key] = [record]
        elif decision.outcome is precedence.Outcome.CONFLICT:
            conflict_with = [h.pk for h in current]
            conflicts.append((p, record, list(current)))
            heads[key] = [record, *current]
        elif decision.outcome is precedence.Outcome.ACTIVATE:
            heads[key] = [record]
        # KEEP_INACTIVE: the record is stored but is not a head; the heads stay as they are.
        records.append(record)
        p.result.written = WriteResult(record=record, created=True, decision=decision, conflict_with=conflict_with)
        p.audit = {"event_id": p.event.pk if p.event else None, "outcome": decision.outcome.value,
                   "reason": decision.reason, "superseded": superseded, "conflict_with": conflict_with,
                   "retired_candidates": [], **p.write.audit}
    to_embed = [(r, p.result.index) for r, p in zip(records, fresh, strict=True) if p.memory_class.embed]
    if vectors is not None and to_embed:
        computed = vectors.result()
        for record, index in to_embed:
            record.embedding = computed[positions[index]]
    new_ids = {r.pk for r in records}
    # Heads written earlier by this call are inserted with their final status; older ones are updated.
    _insert_records(records)
    if any(r.embedding is not None for r in records):
        # Vectors written with the rows: no worker task follows to move the subject's centroid with them.
        vectors_written({scope.subject_id: sum(r.embedding is not None for r in records)})
    MemoryRecord.objects.bulk_update([h for pk, h in superseded_heads.items() if pk not in new_ids],
                                     ["status", "superseded_by", "status_reason"], batch_size=MAX_BATCH)
    _retire(scope, fresh, records)
    for p, record, others in conflicts:
        conflict = Conflict.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                           namespace=p.item.namespace, field=p.item.field)
        conflict.records.add(record, *others, through_defaults={"tenant_id": scope.tenant_id})
    # The records' types are known here: no query to find out whether any is episodic.
    embedded_with_windows = schedule_context([r.pk for r in records],
                                             episodic=any(r.memory_type == MemoryType.EPISODIC for r in records))
    bulk.copy_rows(AuditEntry, [
        AuditEntry(tenant_id=scope.tenant_id, subject_id=scope.subject_id, actor=scope.actor, action=p.write.action,
                   object_type="memory", object_id=record.pk, data=p.audit)
        for p, record in zip(fresh, records, strict=True)
    ])
    # Counted once the records are durable: a write rolled back (a correction outranked) was never written.
    actions = [p.write.action for p in fresh]
    transaction.on_commit(lambda: metrics.records_written(actions))
    embed_ids = [r.pk for r, _ in to_embed if r.embedding is None]
    if embed_ids and not embedded_with_windows:
        # One task for the whole call, run as batched model calls; an import's goes to the bulk queue, a few
        # records' to the interactive one.
        transaction.on_commit(lambda: enqueue("memory.records.tasks.embed_records", embed_ids,
                                              queue=embedding_queue(len(embed_ids))))


def _retire(scope: Scope, fresh: list[_Pending], records: list[MemoryRecord]) -> None:
    """What the new active records leave behind: a confirmed record retires the unreviewed candidate
    records of its key, and a correction supersedes the record it corrects even where precedence did
    not (a candidate record, or one whose validity ended)."""
    owners: dict[tuple[str, str], tuple[_Pending, MemoryRecord]] = {}
    for p, record in zip(fresh, records, strict=True):
        if record.status == RecordStatus.ACTIVE and record.confidence == Confidence.CONFIRMED:
            owners[(p.item.namespace, p.item.field)] = (p, record)
    answers = {key: record for key, (_, record) in owners.items()}
    for old in _retire_candidate_records(tenant_id=scope.tenant_id, subject_id=scope.subject_id, answers=answers):
        owners[(old.namespace, old.field)][0].audit["retired_candidates"].append(old.pk)
    for p, record in zip(fresh, records, strict=True):
        if p.write.corrects is not None:
            MemoryRecord.objects.filter(pk=p.write.corrects, status=RecordStatus.ACTIVE).update(
                status=RecordStatus.SUPERSEDED, superseded_by=record, status_reason="corrected by the user")


def records_supersede(*, scope: Scope, winner: MemoryRecord, losers: list[MemoryRecord], reason: str,
                      action: str, link: MemoryRecord | None = None, data: Mapping[str, Any] | None = None,
                      ) -> list[str]:
    """A decision precedence could not make, taken by a person (a reviewer resolving a conflict): the
    active ``losers`` step aside for ``winner``, and ``winner`` records that it supersedes ``link`` when
    it names no record yet. The same permission and namespace checks as every write, and one audit row
    per record changed, in the caller's transaction; the caller holds the key lock and the rows.
    Returns the ids of the records superseded."""
    scope.require(WRITE)
    for record in (winner, *losers):
        scope.require_namespace(record.namespace)
        if (record.tenant_id, record.subject_id) != (scope.tenant_id, scope.subject_id):
            raise ConflictError("A record of another subject cannot be decided here.", code="scope_mismatch")
    changed = [r for r in losers if r.status == RecordStatus.ACTIVE]
    for record in changed:
        record.status, record.superseded_by, record.status_reason = RecordStatus.SUPERSEDED, winner, reason[:200]
    MemoryRecord.objects.bulk_update(changed, ["status", "superseded_by", "status_reason"])
    linked = link is not None and winner.supersedes_id is None
    if linked:
        winner.supersedes = link
        MemoryRecord.objects.bulk_update([winner], ["supersedes"])
    extra = dict(data or {})
    AuditEntry.objects.bulk_create(
        [AuditEntry(tenant_id=scope.tenant_id, subject_id=scope.subject_id, actor=scope.actor, action=action,
                    object_type="memory", object_id=r.pk,
                    data={"status": RecordStatus.SUPERSEDED, "superseded_by": winner.pk, **extra}) for r in changed]
        + ([AuditEntry(tenant_id=scope.tenant_id, subject_id=scope.subject_id, actor=scope.actor, action=action,
                       object_type="memory", object_id=winner.pk,
                       data={"supersedes": link.pk, **extra})] if linked and link is not None else []))
    return [r.pk for r in changed]


def _insert_records(records: list[MemoryRecord]) -> None:
    """Each record written once, with its full-text vector computed on the way in (memory/db/bulk.py): none for
    a class that requires encryption, whose text is ciphertext (as in indexing.refresh_search_vectors), and the
    source event's time as ``occurred_at`` when the write named none, so a conversation's turns are read in
    event order through an index. Setting the vector by a later UPDATE wrote every row twice (~45 ms of a
    500-record call)."""
    q = connection.ops.quote_name
    table = q(MemoryRecord._meta.db_table)
    vector, params = record_search_vector_sql()
    bulk.insert_staged(MemoryRecord, records, computed={
        "search_vector": f"CASE WHEN NOT c.encryption_required THEN {vector} END",
        "occurred_at": f"coalesce({table}.{q('occurred_at')}, e.{q('occurred_at')})",
    }, joins=f"JOIN {q(MemoryClass._meta.db_table)} c ON c.id = {table}.{q('memory_class_id')} "
             f"LEFT JOIN {q(Event._meta.db_table)} e ON e.id = {table}.{q('source_event_id')}", params=params)
