"""Deletion and subject erasure: the writes of the deletion area.

``memory_delete`` and ``subject_erase`` only *plan* (ids, keyed hashes, sealed markers), write the
tombstones at once (so a consolidation job re-delivered while the fan-out runs already meets them),
and queue ``run_deletion`` on commit. ``deletion_run`` then walks every registered purge surface in
order, each step in its own transaction with bounded retries, and finally verifies every registered
read surface as the owning principal. Only then is the job ``completed``.

Retry policy (chosen over re-enqueueing a ONCE schedule): a failing step is retried inside the task,
``ENGRAM_DELETION_STEP_ATTEMPTS`` times with exponential backoff starting at
``ENGRAM_DELETION_RETRY_BASE_SECONDS``. The whole run stays well under the worker timeout and the
attempts are visible per step. A run that still cannot finish leaves the job ``pending`` with the
reason and a ``retry_at`` (``ENGRAM_DELETION_JOB_RETRY_SECONDS`` * 2^retry): the minute sweep runs it
again, ``ENGRAM_DELETION_JOB_RETRIES`` times, before the job ends ``failed``. The person's deletion is
under way until then. Asking for the same deletion again (DELETE once more), ``manage.py
deletion_retry`` or the overview's button re-queue a failed job: it resumes at the first step that is
not done.

Verification cannot be starved by traffic: a read path that ran during the job may have written
residue after its purge step (a retrieve's log, a window the worker rebuilt), so a check that finds
residue has the purge steps behind it run again, and only residue that survives a fresh purge fails.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from memory import locks, metrics
from memory.audit import audit
from memory.content import decrypt_str, encrypt_str, unseal, unseal_candidate, unseal_text
from memory.deletion import registry
from memory.deletion.journal import journal_append
from memory.deletion.models import DeletionJob, DeletionStep, new_deletion_id
from memory.embedder import get_embedder
from memory.errors import NotFound
from memory.models import Candidate, Event, MemoryRecord, RecordStatus, Subject, Tombstone
from memory.queues import URGENT, enqueue
from memory.records.selectors import supersession_chain
from memory.scope import WRITE, Scope
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
    return Scope.for_system(actor="system:deletion", tenant_id=tenant_id, subject_id=subject_id,
                            subject_external_id=subject_external_id, permissions=("read",), reader_role="owner")


# --- planning --------------------------------------------------------------------------------------


@dataclass
class _Plan:
    memory_ids: list[str]
    event_ids: list[str]
    markers: list[str]
    tombstones: list[dict[str, Any]]
    sealed: dict[str, Any] = field(default_factory=dict)  # the plan hooks' answers (registry.on_plan)


def _markers_of(fact: Any, text: str, event_text: str = "") -> list[str]:
    out = [text, event_text]
    value = fact.get("value") if isinstance(fact, dict) else None
    if isinstance(value, str):
        out.append(value)
    elif value is not None:
        out.append(json.dumps(value, ensure_ascii=False))
    return [m for m in out if m and len(m.strip()) >= MIN_MARKER_CHARS]


def _plan_records(records: list[MemoryRecord], *, whole_subject: bool = False) -> _Plan:
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
    sealed: dict[str, Any] = {}
    if records and not whole_subject:
        target = registry.DeletionTarget(tenant_id=records[0].tenant_id, subject_id=records[0].subject_id,
                                         subject_external_id="", memory_ids=tuple(memory_ids))
        sealed = {name: hook(target) for name, hook in registry.plan_hooks()}
    return _Plan(memory_ids=memory_ids, event_ids=sorted(events), markers=sorted(set(markers)),
                 tombstones=tombstones, sealed=sealed)


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


def write_tombstones(*, tenant_id: int, subject_hash_value: str, items: list[dict[str, Any]]) -> int:
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
                actor: str | None = None, job_id: str | None = None) -> DeletionJob:
    s_hash = subject_hash(scope.tenant_id, scope.subject_external_id)
    job = DeletionJob.objects.create(
        id=job_id or new_deletion_id(), tenant_id=scope.tenant_id, subject_id=scope.subject_id,
        subject_hash=s_hash, kind=kind, memory_id=memory_id, requested_by=actor or scope.actor,
        plan={"memory_ids": plan.memory_ids, "event_ids": plan.event_ids, "subject_id": scope.subject_id,
              "tombstones": plan.tombstones, **(extra_plan or {})},
        markers_sealed=encrypt_str(json.dumps({"markers": plan.markers, "sealed": plan.sealed} if plan.sealed
                                              else plan.markers)),
    )
    names = [s.name for s in registry.surfaces()] + [VERIFICATION]
    DeletionStep.objects.bulk_create([DeletionStep(job=job, tenant_id=job.tenant_id, name=n, position=i)
                                      for i, n in enumerate(names)])
    write_tombstones(tenant_id=scope.tenant_id, subject_hash_value=s_hash, items=plan.tombstones)
    if job_id is None:  # a job re-applied from the journal is in it already
        journal_append(job)
    audit(actor=actor or scope.actor, action=f"deletion.{kind}", object_type="deletion", object_id=job.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"memory_ids": plan.memory_ids, "event_ids": plan.event_ids})
    _enqueue(job.pk)
    _summaries_leave_retrieval(scope=scope, plan=plan, whole_subject=bool((extra_plan or {}).get("whole_subject")))
    return job


def _summaries_leave_retrieval(*, scope: Scope, plan: _Plan, whole_subject: bool) -> None:
    """Thread summaries over the events the records cite go stale (and blank) in this transaction, not
    when the job runs: out of retrieval from the DELETE on (the threads area's request hook)."""
    target = registry.DeletionTarget(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, subject_external_id=scope.subject_external_id,
        event_ids=tuple(plan.event_ids), whole_subject=whole_subject)
    for hook in registry.request_hooks():
        hook(target)


def _enqueue(job_id: str) -> None:
    transaction.on_commit(lambda: enqueue("memory.deletion.tasks.run_deletion", job_id, queue=URGENT))


def rearm_failed(job: DeletionJob) -> bool:
    """A failed job back to pending with its automatic retries afresh (asked for again); whether it was failed."""
    return bool(DeletionJob.objects.filter(pk=job.pk, status=DeletionJob.Status.FAILED).update(
        status=DeletionJob.Status.PENDING, reason="", retry_at=None, retries=0))


def _requeue_if_failed(job: DeletionJob) -> DeletionJob:
    if rearm_failed(job):
        job.refresh_from_db()
        _enqueue(job.pk)
    return job


@transaction.atomic
def deletion_retry(*, job_id: str, actor: str) -> DeletionJob:
    """An operator runs a failed job again now (or a job waiting for its automatic retry, without the wait).
    A job that is running or completed is left as it is."""
    job = DeletionJob.objects.select_for_update().filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"No deletion '{job_id}'.")
    if job.status == DeletionJob.Status.FAILED or (job.status == DeletionJob.Status.PENDING and job.retry_at):
        DeletionJob.objects.filter(pk=job.pk).update(status=DeletionJob.Status.PENDING, retry_at=None, retries=0)
        audit(actor=actor, action="deletion.retried", object_type="deletion", object_id=job.pk,
              tenant_id=job.tenant_id, data={"was": job.status})
        _enqueue(job.pk)
        job.refresh_from_db()
    return job


# --- the entry points ------------------------------------------------------------------------------


@transaction.atomic
def memory_delete(*, scope: Scope, memory_id: str) -> DeletionJob:
    """Plan and queue the deletion of one record (and the versions it superseded). Idempotent:
    asking again returns the same job (re-queued when it had failed)."""
    scope.require(WRITE)
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
    # Deleting a memory deletes its history: the versions it superseded go with it.
    older = MemoryRecord.objects.filter(tenant_id=record.tenant_id, subject_id=record.subject_id)
    plan = _plan_records(supersession_chain(older, record, newer=False))
    try:
        with transaction.atomic():
            job = _create_job(scope=scope, kind=DeletionJob.Kind.MEMORY, plan=plan, memory_id=memory_id)
    except IntegrityError:  # a twin request won the unique (tenant, memory_id) constraint
        return DeletionJob.objects.get(tenant_id=scope.tenant_id, memory_id=memory_id, kind=DeletionJob.Kind.MEMORY)
    _hide_at_once(plan.memory_ids)
    return job


def _hide_at_once(memory_ids: list[str]) -> None:
    """The records read as deleted from this commit on, before the job purges their content: the next
    GET, list, fact or retrieval no longer serves them (status is a predicate of every read, and the
    record payload shows no content for a deleted record). The content itself stays until the job's
    steps run, because they find candidates, events and markers through it."""
    MemoryRecord.objects.filter(pk__in=memory_ids).exclude(status=RecordStatus.DELETED).update(
        status=RecordStatus.DELETED, status_reason="deletion requested")


@transaction.atomic
def subject_erase(*, scope: Scope) -> DeletionJob:
    """Plan and queue the erasure of everything about the scope's subject. A namespace grant is a part
    of the subject's data; erasing all of it needs a principal without one."""
    scope.require(WRITE)
    scope.require_unrestricted("Erasing a whole subject")
    # Serialise erasures of one subject (row lock on the Subject).
    Subject.objects.select_for_update().filter(pk=scope.subject_id).first()
    s_hash = subject_hash(scope.tenant_id, scope.subject_external_id)
    running = DeletionJob.objects.filter(
        tenant_id=scope.tenant_id, subject_hash=s_hash, kind=DeletionJob.Kind.SUBJECT,
        status__in=[DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING, DeletionJob.Status.FAILED]).first()
    if running is not None:
        return _requeue_if_failed(running)
    return _create_job(scope=scope, kind=DeletionJob.Kind.SUBJECT, plan=_plan_subject(scope),
                       extra_plan={"whole_subject": True})


def _plan_subject(scope: Scope) -> _Plan:
    records = list(MemoryRecord.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id))
    plan = _plan_records(records, whole_subject=True)
    plan.event_ids = sorted(set(plan.event_ids) | set(
        Event.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).values_list("pk", flat=True)))
    for c in Candidate.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id):
        plan.markers += _markers_of(*unseal_candidate(c)[:2])
    plan.markers = sorted(set(plan.markers))
    return plan


@transaction.atomic
def thread_clear_job(*, scope: Scope, thread_id: str, up_to_seq: int) -> DeletionJob:
    """The job that finishes clearing a thread's events up to ``up_to_seq`` (the threads area blanked
    them in the caller's transaction). Clearing the same range again returns the same job."""
    scope.require(WRITE)
    scope.require_threads()
    s_hash = subject_hash(scope.tenant_id, scope.subject_external_id)
    existing = DeletionJob.objects.filter(tenant_id=scope.tenant_id, subject_hash=s_hash, kind=DeletionJob.Kind.THREAD,
                                          plan__threads__contains=[[thread_id, up_to_seq]]).first()
    if existing is not None:
        return _requeue_if_failed(existing)
    plan = _Plan(memory_ids=[], event_ids=[], markers=[], tombstones=[])
    return _create_job(scope=scope, kind=DeletionJob.Kind.THREAD, plan=plan,
                       extra_plan={"threads": [[thread_id, up_to_seq]]})


@transaction.atomic
def retention_delete(*, records: list[MemoryRecord]) -> DeletionJob | None:
    """purge_expired: delete records of one subject that passed their class's maximum retention."""
    if not records:
        return None
    subject = Subject.objects.get(pk=records[0].subject_id)
    scope = Scope.for_system(actor="system:retention", tenant_id=subject.tenant_id, subject_id=subject.pk,
                             subject_external_id=subject.external_id, permissions=("read", "write"))
    plan = _plan_records(records)
    return _create_job(scope=scope, kind=DeletionJob.Kind.RETENTION, plan=plan)


# --- after a restore: the journal's deletions made again ------------------------------------------


# --- running a job ---------------------------------------------------------------------------------


class VerificationFailed(Exception):
    pass


def target_of(job: DeletionJob) -> registry.DeletionTarget:
    unsealed = json.loads(decrypt_str(job.markers_sealed)) if job.markers_sealed else []
    # A list: the markers alone (an erasure's job, or one planned before plan hooks existed).
    markers: list[str] = unsealed["markers"] if isinstance(unsealed, dict) else unsealed
    sealed: dict[str, Any] = unsealed["sealed"] if isinstance(unsealed, dict) else {}
    plan = job.plan
    return registry.DeletionTarget(
        tenant_id=job.tenant_id, subject_id=int(plan.get("subject_id") or 0),
        subject_external_id=plan.get("_subject_external_id", ""),
        memory_ids=tuple(plan.get("memory_ids", [])), event_ids=tuple(plan.get("event_ids", [])),
        markers=tuple(markers), whole_subject=bool(plan.get("whole_subject")),
        threads=tuple((str(t), int(seq)) for t, seq in plan.get("threads", [])), requested_at=job.created_at,
        document_ids=tuple(int(d) for d in plan.get("document_ids", [])), sealed=sealed,
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
    started = time.perf_counter()
    for attempt in range(_attempts()):
        try:
            with transaction.atomic():
                rows = action(target)
                DeletionStep.objects.filter(pk=step.pk).update(
                    status=DeletionStep.Status.DONE, attempts=step.attempts + 1, rows=int(rows or 0),
                    last_error="", duration_ms=_ms_since(started), updated_at=timezone.now())
            step.attempts += 1
            return True
        except Exception as exc:  # noqa: BLE001 - any surface failure is recorded and retried
            step.attempts += 1
            step.last_error = _redact(f"{type(exc).__name__}: {exc}", target.markers)
            DeletionStep.objects.filter(pk=step.pk).update(
                status=DeletionStep.Status.FAILED, attempts=step.attempts, last_error=step.last_error,
                duration_ms=_ms_since(started), updated_at=timezone.now())
            if attempt + 1 < _attempts():
                time.sleep(_backoff(attempt))
    return False


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


def _residue(target: registry.DeletionTarget, kind: str) -> dict[str, list[str]]:
    """Every read check the job's kind walks, as the owning principal (each check builds ``owner_scope``): name ->
    places."""
    found = {name: check(target) for name, check in registry.read_checks(kind).items()}
    return {name: places for name, places in found.items() if places}


def _purge_again(target: registry.DeletionTarget, names: list[str], kind: str) -> None:
    """The purge steps behind the checks that found residue: the surface of the same name, or, for a check
    of a read path that spans surfaces (retrieve, export, list ...), every surface, in order. Every purge is
    idempotent, so running one again is safe."""
    surfaces = registry.surfaces(kind)
    by_name = {s.name for s in surfaces}
    wanted = set(names) if set(names) <= by_name else by_name
    for surface in surfaces:
        if surface.name in wanted:
            surface.purge(target)


def _verify(target: registry.DeletionTarget, kind: str = "") -> int:
    """Read every surface back; residue gets one fresh purge and one more look before it fails the step."""
    residue = _residue(target, kind)
    if residue:
        _purge_again(target, sorted(residue), kind)
        residue = _residue(target, kind)
    if residue:
        problems = [f"{name}: {p}" for name, places in residue.items() for p in places]
        raise VerificationFailed("content still readable at " + "; ".join(problems))
    return 0


def _failed(job: DeletionJob, step: str, attempts: int, reason: str) -> str:
    """A run that could not finish: the job waits for its next automatic retry (still ``pending`` for the
    person), or, with the retries spent, ends ``failed``."""
    retries = int(settings.ENGRAM_DELETION_JOB_RETRIES)
    retrying = job.retries < retries
    status = DeletionJob.Status.PENDING if retrying else DeletionJob.Status.FAILED
    retry_at = (timezone.now() + timedelta(seconds=float(settings.ENGRAM_DELETION_JOB_RETRY_SECONDS)
                                           * (2 ** job.retries))) if retrying else None
    with transaction.atomic():
        DeletionJob.objects.filter(pk=job.pk).update(status=status, reason=reason[:500], retry_at=retry_at,
                                                     retries=job.retries + (1 if retrying else 0))
        audit(actor="system:deletion", action="deletion.retrying" if retrying else "deletion.failed",
              object_type="deletion", object_id=job.pk, tenant_id=job.tenant_id,
              data={"step": step, "attempts": attempts, "retries": job.retries})
    if not retrying:
        metrics.deletion_finished(status=DeletionJob.Status.FAILED)
    return status


# A worker that starts a single-record job takes the subject's other waiting single-record jobs along (up to this
# many): one pass of purges and one verification for all of them, instead of each waiting for the others' runs.
BATCH = 20


def deletion_run(*, job_id: str) -> str:
    """Run (or resume) a job; returns its status. A twin delivery finds the lock taken and leaves."""
    if not locks.try_session_lock(f"deletion:{job_id}"):
        return "busy"
    companions: list[DeletionJob] = []
    try:
        claimed = DeletionJob.objects.filter(
            pk=job_id, status__in=[DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING]).update(
            status=DeletionJob.Status.RUNNING, retry_at=None, updated_at=timezone.now())
        job = DeletionJob.objects.filter(pk=job_id).first()
        if job is None or not claimed:
            return job.status if job else "missing"
        DeletionJob.objects.filter(pk=job_id).update(runs=job.runs + 1)
        companions = _claim_companions(job)
        return _run(job, companions)
    finally:
        for companion in companions:
            locks.session_unlock(f"deletion:{companion.pk}")
        locks.session_unlock(f"deletion:{job_id}")


def _claim_companions(job: DeletionJob) -> list[DeletionJob]:
    """The subject's other single-record jobs waiting in the queue, claimed like the job itself (their lock, then
    a conditional update): their own task, when it comes, finds them completed (or busy) and leaves. A job
    waiting for an automatic retry waits for it."""
    if job.kind != DeletionJob.Kind.MEMORY or BATCH <= 1:
        return []
    waiting = list(DeletionJob.objects.filter(
        tenant_id=job.tenant_id, subject_hash=job.subject_hash, kind=DeletionJob.Kind.MEMORY,
        status=DeletionJob.Status.PENDING, retry_at__isnull=True).exclude(pk=job.pk)
        .order_by("created_at", "pk").values_list("pk", flat=True)[:BATCH - 1])
    claimed = []
    for pk in waiting:
        if not locks.try_session_lock(f"deletion:{pk}"):
            continue
        if DeletionJob.objects.filter(pk=pk, status=DeletionJob.Status.PENDING, retry_at__isnull=True).update(
                status=DeletionJob.Status.RUNNING, runs=F("runs") + 1, updated_at=timezone.now()):
            claimed.append(pk)
        else:
            locks.session_unlock(f"deletion:{pk}")
    return list(DeletionJob.objects.filter(pk__in=claimed).order_by("created_at", "pk"))


def _subject_external_id(job: DeletionJob) -> str:
    subject = Subject.objects.filter(pk=job.plan.get("subject_id")).only("external_id").first()
    return subject.external_id if subject else ""


def _combined(targets: list[registry.DeletionTarget]) -> registry.DeletionTarget:
    """One target for jobs of one subject: every record, event and marker of each. The earliest request decides
    what counts as said again afterwards."""
    first = targets[0]
    if len(targets) == 1:
        return first

    def union(values: Any) -> tuple[Any, ...]:
        return tuple(dict.fromkeys(v for vs in values for v in vs))

    asked = [t.requested_at for t in targets if t.requested_at is not None]
    return registry.DeletionTarget(
        tenant_id=first.tenant_id, subject_id=first.subject_id, subject_external_id=first.subject_external_id,
        memory_ids=union(t.memory_ids for t in targets), event_ids=union(t.event_ids for t in targets),
        markers=union(t.markers for t in targets), requested_at=min(asked) if asked else None)


def _run(job: DeletionJob, companions: list[DeletionJob] | None = None) -> str:
    group = [job, *(companions or [])]
    external_id = _subject_external_id(job)
    targets = []
    for member in group:
        member.plan["_subject_external_id"] = external_id
        targets.append(target_of(member))
        del member.plan["_subject_external_id"]
    target = _combined(targets)
    steps = {s.name: s for s in job.steps.all()}
    actions: list[tuple[str, Any]] = [(s.name, s.purge) for s in registry.surfaces(job.kind)]
    actions.append((VERIFICATION, lambda t: _verify(t, job.kind)))
    others = [m.pk for m in group[1:]]
    for position, (name, action) in enumerate(actions):
        step = steps.get(name) or DeletionStep.objects.get_or_create(
            job=job, name=name, defaults={"position": position, "tenant_id": job.tenant_id})[0]
        # A batch runs every step for all its jobs (each purge is idempotent), whatever one of them had done.
        if step.status == DeletionStep.Status.DONE and not others:
            continue
        done = _run_step(job, step, action, target)
        if others:  # every job of the batch shows the step as it went
            row = DeletionStep.objects.filter(pk=step.pk).values("status", "rows", "last_error", "duration_ms").get()
            DeletionStep.objects.filter(job_id__in=others, name=name).update(attempts=F("attempts") + 1, **row)
        if not done:
            reason = f"step '{name}' failed after {step.attempts} attempts: {step.last_error}"
            for member in group[1:]:
                _failed(member, name, step.attempts, reason)
            return _failed(job, name, step.attempts, reason)
    get_embedder().clear_query_cache()  # the verification's own queries (the deleted words) go too
    completed_at = timezone.now()
    with transaction.atomic():
        DeletionJob.objects.filter(pk__in=[m.pk for m in group]).update(
            status=DeletionJob.Status.COMPLETED, reason="", markers_sealed="", completed_at=completed_at,
            retry_at=None)
        for member in group:
            audit(actor="system:deletion", action="deletion.completed", object_type="deletion", object_id=member.pk,
                  tenant_id=member.tenant_id, data={"steps": [n for n, _ in actions], "batch": job.pk})
    # From the request to the verified end: what a person asking for the deletion waits (retries included).
    for member in group:
        metrics.deletion_finished(status=DeletionJob.Status.COMPLETED, requested_at=member.created_at,
                                  finished_at=completed_at)
    return DeletionJob.Status.COMPLETED


__all__ = ["memory_delete", "subject_erase", "deletion_run", "deletion_retry", "retention_delete",
           "thread_clear_job", "owner_scope"]
