"""Reviewers' decisions on candidates and conflicts. Every one is a transactional, audited service.

Approval goes through the write gate (memory/records/gate.py) with ``source_type="model_inferred"``,
so the checks and the precedence policy apply exactly as on the API: the class must take
candidates, an approved inference never outranks an explicit statement, an org record or a
verified outcome (it is kept inactive), and the reviewer is the audit actor. The gate writes the
record's audit row (``memory.approve``); the decision on the candidate has its own row. Resolving a
conflict changes records through the gate too (``records_supersede``), with a row per record.

Every service takes the checked caller (a ``Reviewer`` from memory/identity/access.py) and finds its
object through the same access helper as the pages, so a foreign id is the same "not found" everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.audit import audit
from memory.content import unseal_parts
from memory.errors import Conflict as ConflictError
from memory.errors import EngramError, Forbidden, InvalidInput
from memory.identity.access import Reviewer, access_candidate, access_conflict
from memory.models import Candidate, Conflict, MemoryRecord, RecordStatus, SourceType
from memory.normalise import fact_hash
from memory.policy.classes import class_for_namespace, readable_by
from memory.records.gate import RecordInput, Write, WriteResult, lock_record_keys, records_supersede, write_one

MAX_REASON = 200


@dataclass
class Approval:
    candidate: Candidate
    result: WriteResult

    @property
    def active(self) -> bool:
        return self.result.record.status == RecordStatus.ACTIVE


@dataclass
class BulkResult:
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _locked_for_decision(reviewer: Reviewer, candidate_id: str) -> Candidate:
    """Lock order as in consolidation: key lock, then the candidate row."""
    peek = access_candidate(reviewer, candidate_id)
    lock_record_keys(peek.tenant_id, peek.subject_id, [(peek.namespace, peek.field)])
    candidate = (Candidate.objects.select_for_update(of=("self",)).select_related("subject", "source_event")
                 .get(pk=peek.pk))
    if candidate.status != Candidate.Status.REVIEW:
        raise ConflictError(f"Candidate '{candidate_id}' was already decided ({candidate.status}).",
                            code="already_decided")
    return candidate


def _approve(*, reviewer: Reviewer, candidate_id: str, value: Any, text: str, edited: bool) -> Approval:
    candidate = _locked_for_decision(reviewer, candidate_id)
    memory_class = class_for_namespace(tenant_id=candidate.tenant_id, namespace=candidate.namespace)
    if edited and memory_class is not None and not readable_by(memory_class, "reviewer"):
        raise Forbidden("Reviewers may not read this class, so they cannot rewrite its content.",
                        code="class_not_readable")
    if not text.strip():
        raise InvalidInput("The sentence of an approved memory cannot be empty.", code="empty_text")
    event = candidate.source_event
    if event is None:
        raise ConflictError("The candidate's source event was deleted; it cannot be approved.", code="tombstoned")
    item = RecordInput(namespace=candidate.namespace, kind=candidate.kind, field=candidate.field, value=value,
                       text=text, event_id=event.external_id, source_type=SourceType.MODEL_INFERRED,
                       memory_type=candidate.memory_type)
    evidence_events = tuple(sorted({e["event_id"] for e in candidate.evidence if e.get("event_id")}))
    # The gate retires the unreviewed candidate records of this key once the approved record is active.
    result = write_one(scope=reviewer.scope(candidate.subject), write=Write(
        item=item, action="memory.approve", event=event, tombstone_value=True, tombstone_events=evidence_events,
        audit={"candidate_id": candidate.pk, "edited": edited}))
    assert result.decision is not None
    Candidate.objects.filter(pk=candidate.pk).update(
        status=Candidate.Status.APPROVED, result_record=result.record, decided_by_id=reviewer.user_id,
        decided_at=timezone.now(), updated_at=timezone.now())
    audit(actor=reviewer.actor, action="candidate.edit_approve" if edited else "candidate.approve",
          object_type="candidate", object_id=candidate.pk, tenant_id=candidate.tenant_id,
          subject_id=candidate.subject_id,
          data={"record": result.record.pk, "outcome": result.decision.outcome.value, "edited": edited,
                "same_fact": fact_hash(candidate.field, value) == candidate.content_hash})
    candidate.refresh_from_db()
    return Approval(candidate=candidate, result=result)


@transaction.atomic
def candidate_approve(*, reviewer: Reviewer, candidate_id: str) -> Approval:
    """Approve the candidate as proposed."""
    candidate = access_candidate(reviewer, candidate_id)
    fact, text = unseal_parts(candidate.fact, candidate.text)
    return _approve(reviewer=reviewer, candidate_id=candidate_id, value=fact.get("value"), text=text, edited=False)


@transaction.atomic
def candidate_edit_approve(*, reviewer: Reviewer, candidate_id: str, value: Any, text: str) -> Approval:
    """Approve with the reviewer's wording and value (secret-scanned like any write)."""
    return _approve(reviewer=reviewer, candidate_id=candidate_id, value=value, text=text, edited=True)


@transaction.atomic
def candidate_reject(*, reviewer: Reviewer, candidate_id: str, reason: str) -> Candidate:
    reason = " ".join(reason.split())
    if not reason:
        raise InvalidInput("Say why the candidate is rejected.", code="reason_required")
    if len(reason) > MAX_REASON:
        raise InvalidInput(f"A reason is at most {MAX_REASON} characters.", code="reason_too_long")
    candidate = _locked_for_decision(reviewer, candidate_id)
    now = timezone.now()
    Candidate.objects.filter(pk=candidate.pk).update(
        status=Candidate.Status.REJECTED, decided_by_id=reviewer.user_id, decided_at=now, updated_at=now,
        reasons=[*candidate.reasons, {"code": "rejected_by_reviewer", "detail": reason}])
    # The reason stays on the candidate (it may quote content); the audit row holds ids only.
    audit(actor=reviewer.actor, action="candidate.reject", object_type="candidate", object_id=candidate.pk,
          tenant_id=candidate.tenant_id, subject_id=candidate.subject_id, data={})
    candidate.refresh_from_db()
    return candidate


def _locked_conflict(reviewer: Reviewer, conflict_id: int) -> tuple[Conflict, list[MemoryRecord]]:
    peek = access_conflict(reviewer, conflict_id)
    lock_record_keys(peek.tenant_id, peek.subject_id, [(peek.namespace, peek.field)])
    conflict = Conflict.objects.select_for_update(of=("self",)).select_related("subject").get(pk=peek.pk)
    if conflict.status != Conflict.Status.OPEN:
        raise ConflictError(f"Conflict '{conflict_id}' was already resolved.", code="already_decided")
    records = list(conflict.records.select_for_update().order_by("created_at", "pk"))
    if len(records) < 2:
        raise ConflictError("This conflict no longer has two records to choose between.", code="already_decided")
    return conflict, records


def _resolve(*, reviewer: Reviewer, conflict_id: int, keep_current: bool) -> Conflict:
    """The newest record of a conflict is the proposed one; the older ones are current."""
    conflict, records = _locked_conflict(reviewer, conflict_id)
    proposed, current = records[-1], records[:-1]
    winner = current[-1] if keep_current else proposed
    losers = [proposed] if keep_current else current
    reason = f"conflict {conflict.pk} resolved by a reviewer: {'kept current' if keep_current else 'used proposed'}"
    loser_ids = records_supersede(scope=reviewer.scope(conflict.subject), winner=winner, losers=losers,
                                  reason=reason, action="memory.conflict_resolve",
                                  link=None if keep_current else current[-1], data={"conflict_id": conflict.pk})
    now = timezone.now()
    Conflict.objects.filter(pk=conflict.pk).update(
        status=Conflict.Status.RESOLVED, resolved_at=now,
        resolution="kept current" if keep_current else "used proposed")
    audit(actor=reviewer.actor, action="conflict.keep_current" if keep_current else "conflict.use_proposed",
          object_type="conflict", object_id=str(conflict.pk), tenant_id=conflict.tenant_id,
          subject_id=conflict.subject_id, data={"kept": winner.pk, "superseded": loser_ids})
    conflict.refresh_from_db()
    return conflict


@transaction.atomic
def conflict_keep_current(*, reviewer: Reviewer, conflict_id: int) -> Conflict:
    return _resolve(reviewer=reviewer, conflict_id=conflict_id, keep_current=True)


@transaction.atomic
def conflict_use_proposed(*, reviewer: Reviewer, conflict_id: int) -> Conflict:
    return _resolve(reviewer=reviewer, conflict_id=conflict_id, keep_current=False)


def candidates_bulk_approve(*, reviewer: Reviewer, candidate_ids: list[str]) -> BulkResult:
    """Each item in its own transaction: one stale item does not undo the others."""
    result = BulkResult()
    for candidate_id in dict.fromkeys(candidate_ids):
        try:
            candidate_approve(reviewer=reviewer, candidate_id=candidate_id)
        except EngramError as exc:
            result.failed[candidate_id] = exc.detail
        else:
            result.done.append(candidate_id)
    return result


def candidates_bulk_reject(*, reviewer: Reviewer, candidate_ids: list[str], reason: str) -> BulkResult:
    result = BulkResult()
    for candidate_id in dict.fromkeys(candidate_ids):
        try:
            candidate_reject(reviewer=reviewer, candidate_id=candidate_id, reason=reason)
        except EngramError as exc:
            result.failed[candidate_id] = exc.detail
        else:
            result.done.append(candidate_id)
    return result
