"""Deletion, subject erasure and correction: the writes of the deletion area.

``memory_delete`` and ``subject_erase`` only *plan* (ids, keyed hashes, sealed markers), write the
tombstones at once (so a consolidation job re-delivered while the fan-out runs already meets them),
and queue ``run_deletion`` on commit. ``deletion_run`` then walks every registered purge surface in
order, each step in its own transaction with bounded retries, and finally verifies every registered
read surface as the owning principal. Only then is the job ``completed``.

Retry policy (chosen over re-enqueueing a ONCE schedule): a failing step is retried inside the task,
``ENGRAM_DELETION_STEP_ATTEMPTS`` times with exponential backoff starting at
``ENGRAM_DELETION_RETRY_BASE_SECONDS``. The whole run stays well under the worker timeout, the
attempts are visible per step, and a job that still cannot finish ends ``failed`` with the reason.
Asking for the same deletion again (DELETE once more) re-queues a failed job: it resumes at the
first step that is not done.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory.audit import audit
from memory.content import decrypt_str, encrypt_str, unseal, unseal_candidate, unseal_parts, unseal_text
from memory.deletion import registry
from memory.deletion.models import DeletionJob, DeletionStep
from memory.errors import Conflict as ConflictError
from memory.errors import Forbidden, InvalidInput, NotFound
from memory.ids import new_event_id
from memory.models import Candidate, Event, MemoryRecord, RecordStatus, SourceType, Subject, Tombstone
from memory.scope import WRITE, Scope
from memory.services.writes import RecordInput, refuse_secrets, store_confirmed
from memory.tasks import URGENT, enqueue
from memory.tombstones import content_hash_for, event_hash, subject_hash

VERIFICATION = "verification"
# Markers shorter than this are too common to prove anything ("yes", "1") and would fail
# verification on unrelated rows; the record's sentence is always a marker.
MIN_MARKER_CHARS = 4


def tombstone_ttl() -> timedelta:
    """Tombstones outlive every delayed writer: the longest django-q2 re-delivery window
    (retry x max_attempts = 15 min by default), a consolidation backlog, and a client's retry queue.
    30 days by default (ENGRAM_TOMBSTONE_DAYS)."""
    return timedelta(days=settings.ENGRAM_TOMBSTONE_DAYS)


def owner_scope(*, tenant_id: int, subject_id: int, subject_external_id: str) -> Scope:
    """The owning principal, as the verification reads the surfaces."""
    return Scope(tenant_id=tenant_id, subject_id=subject_id, subject_external_id=subject_external_id,
                 permissions=frozenset({"read"}), namespaces=None, actor="system:deletion", reader_role="owner")


# --- planning --------------------------------------------------------------------------------------


@dataclass
class _Plan:
    memory_ids: list[str]
    event_ids: list[str]
    markers: list[str]
    tombstones: list[dict[str, Any]]


def _markers_of(fact: Any, text: str, event_text: str = "") -> list[str]:
    out = [text, event_text]
    value = fact.get("value") if isinstance(fact, dict) else None
    if isinstance(value, str):
        out.append(value)
    elif value is not None:
        out.append(json.dumps(value, ensure_ascii=False))
    return [m for m in out if m and len(m.strip()) >= MIN_MARKER_CHARS]


def _plan_records(records: list[MemoryRecord]) -> _Plan:
    memory_ids = [r.pk for r in records]
    events = {e.pk: e for e in Event.objects.filter(
        pk__in=[r.source_event_id for r in records if r.source_event_id])}
    # Candidates that produced or compete with these records carry the same words as evidence.
    candidates = list(_related_candidates(records))
    for c in candidates:
        if c.source_event_id and c.source_event_id not in events:
            event = Event.objects.filter(pk=c.source_event_id).first()
            if event is not None:
                events[event.pk] = event
    markers: list[str] = []
    tombstones: list[dict[str, Any]] = []
    for r in records:
        fact, text = unseal(r)
        event = events.get(r.source_event_id or "")
        markers += _markers_of(fact, text, unseal_text(event.text) if event else "")
        tombstones.append({"memory_id": r.pk, "namespace": r.namespace, "field": r.field,
                           "content_hash": content_hash_for(r.namespace, r.field, fact.get("value"))
                           if isinstance(fact, dict) else "",
                           "event_hashes": [event_hash(event.external_id)] if event else []})
    for c in candidates:
        c_fact, c_text, c_evidence = unseal_candidate(c)
        markers += _markers_of(c_fact, c_text)
        markers += [str(e.get("text", "")) for e in c_evidence if isinstance(e, dict)
                    and len(str(e.get("text", "")).strip()) >= MIN_MARKER_CHARS]
        event = events.get(c.source_event_id or "")
        tombstones.append({"memory_id": "", "namespace": c.namespace, "field": c.field,
                           "content_hash": content_hash_for(c.namespace, c.field, c_fact.get("value")),
                           "event_hashes": [event_hash(event.external_id)] if event else []})
    for e in events.values():
        e_text = unseal_text(e.text)
        markers += [e_text] if len(e_text.strip()) >= MIN_MARKER_CHARS else []
    return _Plan(memory_ids=memory_ids, event_ids=sorted(events), markers=sorted(set(markers)),
                 tombstones=tombstones)


def _related_candidates(records: list[MemoryRecord]) -> Any:
    from django.db.models import Q

    if not records:
        return Candidate.objects.none()
    ids = [r.pk for r in records]
    match = Q(result_record_id__in=ids) | Q(conflict_record_id__in=ids)
    match |= Q(source_event_id__in=[r.source_event_id for r in records if r.source_event_id])
    for r in records:
        match |= Q(namespace=r.namespace, field=r.field, content_hash=r.content_hash) if r.content_hash else Q()
    first = records[0]
    return Candidate.objects.filter(match, tenant_id=first.tenant_id, subject_id=first.subject_id)


def _with_history(record: MemoryRecord) -> list[MemoryRecord]:
    """The record and the older versions it superseded: deleting a memory deletes its history."""
    chain = [record]
    seen = {record.pk}
    older = record.supersedes_id
    while older and older not in seen:
        previous = MemoryRecord.objects.filter(pk=older, tenant_id=record.tenant_id,
                                               subject_id=record.subject_id).first()
        if previous is None:
            break
        chain.append(previous)
        seen.add(previous.pk)
        older = previous.supersedes_id
    return chain


def _write_tombstones(*, tenant_id: int, subject_hash_value: str, items: list[dict[str, Any]]) -> int:
    expires = timezone.now() + tombstone_ttl()
    existing = set(Tombstone.objects.filter(tenant_id=tenant_id, subject_hash=subject_hash_value)
                   .values_list("memory_id", "namespace", "field", "content_hash"))
    rows = [Tombstone(tenant_id=tenant_id, subject_hash=subject_hash_value, memory_id=t["memory_id"],
                      namespace=t["namespace"], field=t["field"], content_hash=t["content_hash"],
                      event_hashes=t["event_hashes"], expires_at=expires)
            for t in items if (t["memory_id"], t["namespace"], t["field"], t["content_hash"]) not in existing]
    Tombstone.objects.bulk_create(rows)
    return len(rows)


def _create_job(*, scope: Scope, kind: str, plan: _Plan, memory_id: str = "", extra_plan: dict | None = None,
                actor: str | None = None) -> DeletionJob:
    s_hash = subject_hash(scope.tenant_id, scope.subject_external_id)
    job = DeletionJob.objects.create(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, subject_hash=s_hash, kind=kind,
        memory_id=memory_id, requested_by=actor or scope.actor,
        plan={"memory_ids": plan.memory_ids, "event_ids": plan.event_ids, "subject_id": scope.subject_id,
              "tombstones": plan.tombstones, **(extra_plan or {})},
        markers_sealed=encrypt_str(json.dumps(plan.markers)),
    )
    names = [s.name for s in registry.surfaces()] + [VERIFICATION]
    DeletionStep.objects.bulk_create([DeletionStep(job=job, name=n, position=i) for i, n in enumerate(names)])
    _write_tombstones(tenant_id=scope.tenant_id, subject_hash_value=s_hash, items=plan.tombstones)
    audit(actor=actor or scope.actor, action=f"deletion.{kind}", object_type="deletion", object_id=job.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"memory_ids": plan.memory_ids, "event_ids": plan.event_ids})
    _enqueue(job.pk)
    _summaries_leave_retrieval(scope=scope, plan=plan, whole_subject=bool((extra_plan or {}).get("whole_subject")))
    return job


def _summaries_leave_retrieval(*, scope: Scope, plan: _Plan, whole_subject: bool) -> None:
    """Thread summaries over the events the records cite go stale (and blank) in this transaction, not
    when the job runs: out of retrieval from the DELETE on (the threads area's hook; issue 6)."""
    try:
        from memory.threads.deletion_surfaces import summaries_stale_on_request
    except ImportError:  # the threads area is not installed
        return
    summaries_stale_on_request(registry.DeletionTarget(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, subject_external_id=scope.subject_external_id,
        event_ids=tuple(plan.event_ids), whole_subject=whole_subject))


def _enqueue(job_id: str) -> None:
    transaction.on_commit(lambda: enqueue("memory.deletion.tasks.run_deletion", job_id, queue=URGENT))


def _requeue_if_failed(job: DeletionJob) -> DeletionJob:
    if job.status == DeletionJob.Status.FAILED:
        DeletionJob.objects.filter(pk=job.pk, status=DeletionJob.Status.FAILED).update(
            status=DeletionJob.Status.PENDING, reason="")
        job.refresh_from_db()
        _enqueue(job.pk)
    return job


def _require_write(scope: Scope) -> None:
    if not scope.can(WRITE):
        raise Forbidden("Deleting or correcting memories needs the write scope.", code="insufficient_scope")


# --- the entry points ------------------------------------------------------------------------------


@transaction.atomic
def memory_delete(*, scope: Scope, memory_id: str) -> DeletionJob:
    """Plan and queue the deletion of one record (and the versions it superseded). Idempotent:
    asking again returns the same job (re-queued when it had failed)."""
    _require_write(scope)
    s_hash = subject_hash(scope.tenant_id, scope.subject_external_id)
    # The lock serialises two concurrent DELETEs of one record: the second sees the first's job.
    record = (MemoryRecord.objects.for_scope(scope).filter(pk=memory_id, subject_id=scope.subject_id)
              .select_for_update(of=("self",)).first())
    if record is None:
        raise NotFound(f"No memory '{memory_id}' in this scope.")
    job = (DeletionJob.objects.filter(tenant_id=scope.tenant_id, subject_hash=s_hash, memory_id=memory_id,
                                      kind=DeletionJob.Kind.MEMORY).first()
           or DeletionJob.objects.filter(tenant_id=scope.tenant_id, subject_hash=s_hash,
                                         plan__memory_ids__contains=[memory_id]).order_by("created_at").first())
    if job is not None:
        return _requeue_if_failed(job)
    if record.status == RecordStatus.DELETED:
        raise NotFound(f"No memory '{memory_id}' in this scope.")
    plan = _plan_records(_with_history(record))
    try:
        with transaction.atomic():
            return _create_job(scope=scope, kind=DeletionJob.Kind.MEMORY, plan=plan, memory_id=memory_id)
    except IntegrityError:  # a twin request won the unique (tenant, memory_id) constraint
        return DeletionJob.objects.get(tenant_id=scope.tenant_id, memory_id=memory_id, kind=DeletionJob.Kind.MEMORY)


@transaction.atomic
def subject_erase(*, scope: Scope) -> DeletionJob:
    """Plan and queue the erasure of everything about the scope's subject."""
    _require_write(scope)
    # Serialise erasures of one subject (row lock on the Subject).
    Subject.objects.select_for_update().filter(pk=scope.subject_id).first()
    s_hash = subject_hash(scope.tenant_id, scope.subject_external_id)
    running = DeletionJob.objects.filter(
        tenant_id=scope.tenant_id, subject_hash=s_hash, kind=DeletionJob.Kind.SUBJECT,
        status__in=[DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING, DeletionJob.Status.FAILED]).first()
    if running is not None:
        return _requeue_if_failed(running)
    records = list(MemoryRecord.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id))
    plan = _plan_records(records)
    plan.event_ids = sorted(set(plan.event_ids) | set(
        Event.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).values_list("pk", flat=True)))
    for c in Candidate.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id):
        plan.markers += _markers_of(*unseal_candidate(c)[:2])
    plan.markers = sorted(set(plan.markers))
    return _create_job(scope=scope, kind=DeletionJob.Kind.SUBJECT, plan=plan, extra_plan={"whole_subject": True})


@transaction.atomic
def retention_delete(*, records: list[MemoryRecord]) -> DeletionJob | None:
    """purge_expired: delete records of one subject that passed their class's maximum retention."""
    if not records:
        return None
    subject = Subject.objects.get(pk=records[0].subject_id)
    scope = Scope(tenant_id=subject.tenant_id, subject_id=subject.pk, subject_external_id=subject.external_id,
                  permissions=frozenset({"read", "write"}), namespaces=None, actor="system:retention")
    plan = _plan_records(records)
    return _create_job(scope=scope, kind=DeletionJob.Kind.RETENTION, plan=plan)


@dataclass
class CorrectionResult:
    record: MemoryRecord
    previous: MemoryRecord


@transaction.atomic
def memory_correct(*, scope: Scope, memory_id: str, value: Any, text: str = "",
                   event_text: str = "") -> CorrectionResult:
    """A new explicit_user_statement record that supersedes ``memory_id``; summaries citing the old
    record's source event are marked stale (and regenerated) by the threads area when present."""
    _require_write(scope)
    old = (MemoryRecord.objects.for_scope(scope).filter(pk=memory_id, subject_id=scope.subject_id)
           .select_related("memory_class").first())
    if old is None:
        raise NotFound(f"No memory '{memory_id}' in this scope.")
    if old.status != RecordStatus.ACTIVE:
        raise ConflictError(f"Only an active memory can be corrected; this one is {old.status}.",
                            code="not_active")
    old_fact, _ = unseal(old)
    if value is None and not text:
        raise InvalidInput("Give the corrected value or text.")
    if value is None:
        value = old_fact.get("value")
    item = RecordInput(namespace=old.namespace, kind=old.kind, field=old.field, value=value,
                       text=text or f"{old.field}: {value}", event_id=new_event_id(),
                       source_type=SourceType.EXPLICIT_USER_STATEMENT, memory_type=old.memory_type,
                       event_text=event_text or text)
    refuse_secrets({**item.canonical(), "event_text": item.event_text})
    event = Event.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id, external_id=item.event_id,
                                 source_type=item.source_type, payload_hash="correction", actor=scope.actor,
                                 text=item.event_text or item.text)
    result = store_confirmed(scope=scope, item=item, memory_class=old.memory_class, event=event,
                             actor_action="memory.correct")
    new = result.record
    if new.status != RecordStatus.ACTIVE:
        raise ConflictError("A higher-authority record stands for this field; the correction cannot replace it.",
                            code="correction_outranked")
    old.refresh_from_db()
    if old.status == RecordStatus.ACTIVE:  # e.g. a candidate-confidence record is no precedence head
        MemoryRecord.objects.filter(pk=old.pk).update(status=RecordStatus.SUPERSEDED, superseded_by=new,
                                                      status_reason="corrected by the user")
    if new.supersedes_id != old.pk:
        MemoryRecord.objects.filter(pk=new.pk).update(supersedes=old)
    audit(actor=scope.actor, action="memory.correct", object_type="memory", object_id=new.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id, data={"corrects": old.pk, "event_id": event.pk})
    _summaries_follow_correction(scope=scope, old=old)
    new.refresh_from_db()
    old.refresh_from_db()
    return CorrectionResult(record=new, previous=old)


def _summaries_follow_correction(*, scope: Scope, old: MemoryRecord) -> None:
    """Summaries that cite the corrected record (cover its source thread event, or quote its sentence)
    go stale now and are regenerated by the threads area's task on commit."""
    try:
        from memory.threads.models import Summary, ThreadEvent
        from memory.threads.services.summaries import mark_stale, summaries_over
    except ImportError:  # the threads area is not installed
        return
    from django.db.models import Q

    _, old_text = unseal(old)
    event_ids = [old.source_event.external_id] if old.source_event else []
    events = ThreadEvent.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, pk__in=event_ids)
    quoting = Q(pk__in=[])
    if len(old_text.strip()) >= MIN_MARKER_CHARS:
        quoting = Q(text__icontains=old_text)
    citing = Summary.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).filter(
        Q(pk__in=summaries_over(events).values("pk")) | quoting)
    mark_stale(citing, reason=f"memory {old.pk} was corrected", blank=False)


# --- running a job ---------------------------------------------------------------------------------


class VerificationFailed(Exception):
    pass


def target_of(job: DeletionJob) -> registry.DeletionTarget:
    markers: list[str] = json.loads(decrypt_str(job.markers_sealed)) if job.markers_sealed else []
    plan = job.plan
    return registry.DeletionTarget(
        tenant_id=job.tenant_id, subject_id=int(plan.get("subject_id") or 0),
        subject_external_id=plan.get("_subject_external_id", ""),
        memory_ids=tuple(plan.get("memory_ids", [])), event_ids=tuple(plan.get("event_ids", [])),
        markers=tuple(markers), whole_subject=bool(plan.get("whole_subject")),
    )


def _redact(message: str, markers: tuple[str, ...]) -> str:
    """An exception text may quote a row (psycopg's DETAIL does); never keep content in last_error."""
    for marker in sorted(markers, key=len, reverse=True):
        message = message.replace(marker, "[redacted]")
    return message[:400]


def _attempts() -> int:
    return max(1, int(settings.ENGRAM_DELETION_STEP_ATTEMPTS))


def _backoff(attempt: int) -> float:
    return float(settings.ENGRAM_DELETION_RETRY_BASE_SECONDS) * (2 ** attempt)


def _run_step(job: DeletionJob, step: DeletionStep, action: Any, target: registry.DeletionTarget) -> bool:
    for attempt in range(_attempts()):
        try:
            with transaction.atomic():
                rows = action(target)
                DeletionStep.objects.filter(pk=step.pk).update(
                    status=DeletionStep.Status.DONE, attempts=step.attempts + 1, rows=int(rows or 0),
                    last_error="", updated_at=timezone.now())
            step.attempts += 1
            return True
        except Exception as exc:  # noqa: BLE001 - any surface failure is recorded and retried
            step.attempts += 1
            step.last_error = _redact(f"{type(exc).__name__}: {exc}", target.markers)
            DeletionStep.objects.filter(pk=step.pk).update(
                status=DeletionStep.Status.FAILED, attempts=step.attempts, last_error=step.last_error,
                updated_at=timezone.now())
            if attempt + 1 < _attempts():
                time.sleep(_backoff(attempt))
    return False


def _verify(target: registry.DeletionTarget) -> int:
    """Every registered read check, as the owning principal (each check builds ``owner_scope``)."""
    problems: list[str] = []
    for name, check in registry.read_checks().items():
        problems += [f"{name}: {p}" for p in check(target)]
    if problems:
        raise VerificationFailed("content still readable at " + "; ".join(problems))
    return 0


def _lock(job_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [f"deletion:{job_id}"])
        return bool(cursor.fetchone()[0])


def _unlock(job_id: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [f"deletion:{job_id}"])


def deletion_run(*, job_id: str) -> str:
    """Run (or resume) a job; returns its status. A twin delivery finds the lock taken and leaves."""
    if not _lock(job_id):
        return "busy"
    try:
        claimed = DeletionJob.objects.filter(
            pk=job_id, status__in=[DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING]).update(
            status=DeletionJob.Status.RUNNING, updated_at=timezone.now())
        job = DeletionJob.objects.filter(pk=job_id).first()
        if job is None or not claimed:
            return job.status if job else "missing"
        DeletionJob.objects.filter(pk=job_id).update(runs=job.runs + 1)
        return _run(job)
    finally:
        _unlock(job_id)


def _subject_external_id(job: DeletionJob) -> str:
    subject = Subject.objects.filter(pk=job.plan.get("subject_id")).only("external_id").first()
    return subject.external_id if subject else ""


def _run(job: DeletionJob) -> str:
    job.plan["_subject_external_id"] = _subject_external_id(job)
    target = target_of(job)
    del job.plan["_subject_external_id"]
    steps = {s.name: s for s in job.steps.all()}
    actions: list[tuple[str, Any]] = [(s.name, s.purge) for s in registry.surfaces()]
    actions.append((VERIFICATION, _verify))
    for position, (name, action) in enumerate(actions):
        step = steps.get(name) or DeletionStep.objects.get_or_create(job=job, name=name,
                                                                     defaults={"position": position})[0]
        if step.status == DeletionStep.Status.DONE:
            continue
        if not _run_step(job, step, action, target):
            reason = f"step '{name}' failed after {step.attempts} attempts: {step.last_error}"
            with transaction.atomic():
                DeletionJob.objects.filter(pk=job.pk).update(status=DeletionJob.Status.FAILED, reason=reason[:500])
                audit(actor="system:deletion", action="deletion.failed", object_type="deletion", object_id=job.pk,
                      tenant_id=job.tenant_id, data={"step": name, "attempts": step.attempts})
            return DeletionJob.Status.FAILED
    _clear_caches()  # the verification's own reads (query embeddings) must not outlive the job
    with transaction.atomic():
        DeletionJob.objects.filter(pk=job.pk).update(status=DeletionJob.Status.COMPLETED, reason="",
                                                     markers_sealed="", completed_at=timezone.now())
        audit(actor="system:deletion", action="deletion.completed", object_type="deletion", object_id=job.pk,
              tenant_id=job.tenant_id, data={"steps": [n for n, _ in actions]})
    return DeletionJob.Status.COMPLETED


def _clear_caches() -> None:
    from django.core.cache import cache

    from memory.embedder import get_embedder

    cache.clear()
    get_embedder().clear_query_cache()


def markers_of_job(job: DeletionJob) -> list[str]:
    """For tests and operators: what a running job hunts for (empty once completed)."""
    return list(target_of(job).markers)


__all__ = ["memory_delete", "subject_erase", "memory_correct", "deletion_run", "retention_delete",
           "unseal_parts", "owner_scope"]
