"""Bulk writes: up to 500 explicit statements or outcomes, each checked exactly like a single write.

Same gates, same order, same answers as ``memory_write`` / ``outcome_record`` (memory/services/
writes.py, whose helpers this calls): permission -> namespace -> secret scan -> memory class ->
tombstone -> idempotency on source.event_id -> precedence under the per-key advisory lock -> seal
-> audit -> embedding queued on commit. What differs is only how many round trips it takes: classes
are loaded once, events, heads and replays are read in one query each, the locks are taken in one
statement (sorted, so two batches cannot deadlock), and records, audit rows and full-text vectors
are written in bulk. Items that fail a gate get their error and are not written; the others are
written together in one transaction, so a batch is never half-written.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.db import connection, models, transaction
from django.db.models.functions import Now
from django.utils import timezone

from memory.content import seal_text
from memory.embedder import get_embedder
from memory.errors import Conflict as ConflictError
from memory.errors import EngramError, InvalidInput, SecretDetected
from memory.indexing import refresh_search_vectors
from memory.models import (
    AuditEntry,
    Confidence,
    Conflict,
    Event,
    MemoryClass,
    MemoryRecord,
    RecordStatus,
    SourceType,
    Subject,
    Tombstone,
)
from memory.normalise import fact_hash, payload_hash
from memory.policy import precedence
from memory.policy.classes import check_class, pick_class
from memory.policy.secrets import describe, scan_payload
from memory.scope import WRITE, Scope
from memory.services.writes import (
    OUTCOME_SOURCE_TYPES,
    RecordInput,
    _require,
    _require_namespace,
    key_in,
    new_record,
    retire_candidate_records,
)
from memory.tasks import BULK, enqueue
from memory.tombstones import event_hash, is_tombstoned, subject_hash

MAX_BATCH = 500
_EMBEDDING_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-embed")


@dataclass
class ItemResult:
    index: int
    created: bool = False
    record: MemoryRecord | None = None
    error: EngramError | None = None
    decision: precedence.Decision | None = None
    conflict_with: list[str] | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        return "created" if self.created else "existing"


@dataclass
class _Pending:
    result: ItemResult
    item: RecordInput
    memory_class: MemoryClass
    action: str
    digest: str
    event: Event | None = None
    twin_of: _Pending | None = None  # an earlier item of this batch with the same event id
    audit: dict[str, Any] | None = None


def _action_for(item: RecordInput) -> str:
    if item.source_type == SourceType.EXPLICIT_USER_STATEMENT:
        return "memory.write"
    if item.source_type in OUTCOME_SOURCE_TYPES:
        return "outcome.record"
    raise InvalidInput(f"A batch item's source.type is explicit_user_statement or one of "
                       f"{', '.join(OUTCOME_SOURCE_TYPES)}.", code="invalid_source_type")


def _gate(scope: Scope, item: RecordInput, classes: dict[str, MemoryClass], scan_cache: dict[str, list[str]]
          ) -> tuple[str, MemoryClass]:
    """The checks of writes._check_write, in its order, against preloaded classes."""
    action = _action_for(item)
    _require_namespace(scope, item.namespace)
    findings = scan_payload({**item.canonical(), "event_id": item.event_id, "event_text": item.event_text},
                            cache=scan_cache)
    if findings:
        raise SecretDetected(describe(findings))
    return action, check_class(pick_class(classes, item.namespace), namespace=item.namespace, path="confirmed")


def _lock_keys(scope: Scope, keys: set[tuple[str, str]]) -> None:
    """writes.lock_key for many keys in one statement: same lock names, taken in sorted order."""
    names = sorted(f"memory-key:{scope.tenant_id}:{scope.subject_id}:{ns}:{f}" for ns, f in keys)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
                       "FROM unnest(%s::text[]) WITH ORDINALITY AS t(k, n)", [names])


@transaction.atomic
def memory_write_batch(*, scope: Scope, items: list[RecordInput], embed_now: bool = False) -> list[ItemResult]:
    """Write ``items`` (explicit statements or outcomes); one result per item, in order.

    ``embed_now`` computes the new records' embeddings in this call, in one batched model call, and
    inserts them with the rows (no later UPDATE); otherwise one task fills them on the worker."""
    _require(scope, WRITE)
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"A batch holds at most {MAX_BATCH} items.", code="batch_too_large")
    classes = {c.namespace_prefix: c for c in MemoryClass.objects.filter(tenant_id=scope.tenant_id)}
    scan_cache: dict[str, list[str]] = {}
    results = [ItemResult(index=i) for i in range(len(items))]
    pending: list[_Pending] = []
    for result, item in zip(results, items, strict=True):
        try:
            action, memory_class = _gate(scope, item, classes, scan_cache)
        except EngramError as exc:
            result.error = exc
            continue
        pending.append(_Pending(result=result, item=item, memory_class=memory_class, action=action,
                                digest=payload_hash(item.canonical())))
    # The model call overlaps the database work below, which mostly waits on PostgreSQL and so leaves
    # the GIL to torch. It starts after the gates: overlapping the CPU-bound secret scan instead made
    # both slower (GIL contention). Only texts that passed the gates reach the model.
    vectors: Future[list[list[float]]] | None = None
    positions = {p.result.index: n for n, p in enumerate(pending)}
    if embed_now and pending:
        vectors = _EMBEDDING_POOL.submit(get_embedder().embed, [p.item.text for p in pending])
    pending = _drop_tombstoned(scope, pending)
    fresh = _claim_events(scope, pending)
    if fresh:
        _store(scope, fresh, vectors=vectors, positions=positions)
    for p in pending:  # a repeated event id in one batch gets the first item's answer, as a replay
        if p.twin_of is not None and p.result.error is None:
            p.result.error, p.result.record = p.twin_of.result.error, p.twin_of.result.record
    return results


def _any_event_tombstoned(scope: Scope, event_ids: list[str]) -> bool:
    """is_tombstoned(event_ids=...) for a whole batch as one ``?|`` (any element) test on the hashes,
    instead of 500 OR-ed containment tests (which cost more to build than to run)."""
    return Tombstone.objects.filter(
        tenant_id=scope.tenant_id, subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id),
        expires_at__gt=Now(), event_hashes__has_any_keys=[event_hash(e) for e in event_ids],
    ).exists()


def _drop_tombstoned(scope: Scope, pending: list[_Pending]) -> list[_Pending]:
    event_ids = [p.item.event_id for p in pending]
    if not event_ids or not _any_event_tombstoned(scope, event_ids):
        return pending
    kept = []
    for p in pending:  # rare: find which items replay deleted events
        if is_tombstoned(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                         namespace=p.item.namespace, field=p.item.field, value=None, event_ids=[p.item.event_id]):
            p.result.error = ConflictError("This event's content was deleted; a replay cannot recreate it.",
                                           code="tombstoned")
        else:
            kept.append(p)
    return kept


def _claim_events(scope: Scope, pending: list[_Pending]) -> list[_Pending]:
    """Idempotency as in writes._event_get_or_create: one Event per (tenant, subject, event_id).

    Returns the items whose event this batch created; replays get the record of the first write,
    reuses with other content get 409 idempotency_conflict."""
    first_in_batch: dict[str, _Pending] = {}
    candidates: list[_Pending] = []
    for p in pending:
        twin = first_in_batch.get(p.item.event_id)
        if twin is None:
            first_in_batch[p.item.event_id] = p
            candidates.append(p)
        elif twin.digest != p.digest:
            p.result.error = _reused(p.item.event_id)
        else:
            p.twin_of = twin
    ours = [Event(tenant_id=scope.tenant_id, subject_id=scope.subject_id, external_id=p.item.event_id,
                  source_type=p.item.source_type, payload_hash=p.digest, actor=scope.actor,
                  text=seal_text(p.memory_class, p.item.event_text or p.item.text), occurred_at=p.item.occurred_at)
            for p in candidates]
    # ON CONFLICT DO NOTHING waits for a concurrent twin's commit, like the single path's unique index.
    Event.objects.bulk_create(ours, ignore_conflicts=True, batch_size=MAX_BATCH)
    stored = {e.external_id: e for e in Event.objects.filter(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, external_id__in=list(first_in_batch))}
    fresh: list[_Pending] = []
    replays: dict[str, _Pending] = {}
    for p, mine in zip(candidates, ours, strict=True):
        event = stored[p.item.event_id]
        p.event = event
        if event.pk == mine.pk:
            fresh.append(p)
        elif event.payload_hash != p.digest:
            p.result.error = _reused(p.item.event_id)
        else:
            replays[event.pk] = p
    _replay(replays)
    return fresh


def _reused(event_id: str) -> ConflictError:
    return ConflictError(f"Event '{event_id}' was already used for a different write; use a new event id.",
                         code="idempotency_conflict")


def _replay(replays: dict[str, _Pending]) -> None:
    if not replays:
        return
    found: dict[str, MemoryRecord] = {}
    for record in (MemoryRecord.objects.filter(source_event_id__in=list(replays))
                   .select_related("memory_class", "source_event", "subject").order_by("-created_at")):
        found[record.source_event_id] = record  # type: ignore[index]  # oldest wins, as writes._replay
    for event_id, p in replays.items():
        if event_id in found:
            p.result.record = found[event_id]
        else:
            p.result.error = ConflictError("This event was consumed by another write path.",
                                           code="idempotency_conflict")


def _store(scope: Scope, fresh: list[_Pending], *, vectors: Future[list[list[float]]] | None,
           positions: dict[int, int]) -> None:
    """writes.store_confirmed for many items: lock, read heads, decide in order, write in bulk."""
    keys = {(p.item.namespace, p.item.field) for p in fresh}
    _lock_keys(scope, keys)
    key_match = key_in(sorted(keys))
    heads: dict[tuple[str, str], list[MemoryRecord]] = defaultdict(list)
    # As writes._live_heads: every head of the subject's keys, not only those the writer may read.
    for head in (MemoryRecord.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).live()
                 .alias(key_match=key_match).filter(key_match=True, confidence=Confidence.CONFIRMED)
                 .select_for_update(of=("self",)).order_by("-created_at")):
        heads[(head.namespace, head.field)].append(head)
    subject = Subject.objects.get(pk=scope.subject_id)
    now = timezone.now()
    records: list[MemoryRecord] = []
    superseded_heads: dict[str, MemoryRecord] = {}
    conflicts: list[tuple[_Pending, MemoryRecord, list[MemoryRecord]]] = []
    for p in fresh:
        item, memory_class = p.item, p.memory_class
        key = (item.namespace, item.field)
        current = heads[key]
        content_hash = fact_hash(item.field, item.value)
        decision = precedence.decide(new_source_type=item.source_type, new_content_hash=content_hash,
                                     heads=current)
        record = new_record(scope=scope, item=item, memory_class=memory_class, event=p.event, decision=decision,
                            heads=current, content_hash=content_hash, now=now)
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
        p.result.record, p.result.created, p.result.decision = record, True, decision
        p.result.conflict_with = conflict_with
        p.audit = {"event_id": p.event.pk if p.event else None,
                   "outcome": decision.outcome.value, "reason": decision.reason, "superseded": superseded,
                   "conflict_with": conflict_with}
    to_embed = [(r, p.result.index) for r, p in zip(records, fresh, strict=True) if p.memory_class.embed]
    if vectors is not None and to_embed:
        computed = vectors.result()
        for record, index in to_embed:
            record.embedding = computed[positions[index]]
    new_ids = {r.pk for r in records}
    # Heads written earlier by this batch are inserted with their final status; older ones are updated.
    _copy_into(MemoryRecord, records)
    MemoryRecord.objects.bulk_update([h for pk, h in superseded_heads.items() if pk not in new_ids],
                                     ["status", "superseded_by", "status_reason"], batch_size=MAX_BATCH)
    answers = {(r.namespace, r.field): r for r in records if r.status == RecordStatus.ACTIVE}
    for old in retire_candidate_records(tenant_id=scope.tenant_id, subject_id=scope.subject_id, answers=answers,
                                        reason="confirmed record (batch)"):
        owner = next(p for p in fresh if p.result.record is answers[(old.namespace, old.field)])
        assert owner.audit is not None  # every fresh item got its audit data in the loop above
        owner.audit.setdefault("retired_candidates", []).append(old.pk)
    for p, record, others in conflicts:
        conflict = Conflict.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                           namespace=p.item.namespace, field=p.item.field)
        conflict.records.add(record, *others)
    refresh_search_vectors([r.pk for r in records])
    _copy_into(AuditEntry, [
        AuditEntry(tenant_id=scope.tenant_id, subject_id=scope.subject_id, actor=scope.actor, action=p.action,
                   object_type="memory", object_id=p.result.record.pk,  # type: ignore[union-attr]
                   data=p.audit or {})
        for p in fresh
    ])
    embed_ids = [r.pk for r, _ in to_embed if r.embedding is None]
    if embed_ids:
        # One task for the whole batch: the embedder runs it as batched model calls.
        transaction.on_commit(lambda: enqueue("memory.tasks.embed_records", embed_ids, queue=BULK))


def _copy_into(model: type[models.Model], objs: list[Any]) -> None:
    """INSERT many rows with COPY: the same values bulk_create would send (each field's pre_save and
    get_db_prep_save), without composing a statement of 12,000 parameters. Used for rows whose ids
    are set in Python (records) or never read back (audit rows); at 500 rows this is the difference
    between ~1 and ~0.2 ms per record. Inside the caller's transaction, like any other statement."""
    if not objs:
        return
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and isinstance(f, models.AutoField))]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN") as copy:
        for obj in objs:
            copy.write_row([f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])
