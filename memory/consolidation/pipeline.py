"""The consolidation pipeline for one pending candidate.

Order (docs/consolidation.md explains each choice):
normalise -> tombstone -> class policy (model permission, secrets) -> dedupe (same content hash,
then near-duplicate text) -> compare with the active confirmed record -> write + audit.

Policy runs before dedupe so that a refused candidate never lends its evidence to another item.
Consolidation never writes a confirmed record: at most a low-authority ``confidence="candidate"``
record where the class allows it. A confirmed record only comes from a person (review) or the API.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone
from pgvector.django import CosineDistance

from memory import locks
from memory.audit import audit
from memory.content import (
    candidate_is_sealed,
    seal_candidate,
    seal_evidence,
    unseal_candidate,
    unseal_text,
)
from memory.embedder import get_embedder
from memory.models import Candidate, Confidence, Event, MemoryClass, MemoryRecord, SourceType
from memory.normalise import fact_hash
from memory.policy.classes import WRITE_PATH_NEEDS, class_for_namespace
from memory.policy.secrets import scan_payload
from memory.records.gate import RecordInput, Write, lock_record_keys, write_one
from memory.scope import WRITE, Scope
from memory.tombstones import is_tombstoned

# Cosine similarity above which two candidates' sentences count as the same claim (all-MiniLM-L6-v2).
# Measured pairs: paraphrases 0.93-0.96 ("Prefers aisle seats" / "Prefers an aisle seat" 0.959),
# while different claims reach 0.895 ("Prefers morning flights" / "Prefers evening flights") and
# 0.872 ("Has a dog named Rex" / "Has a cat named Rex"). 0.92 sits above every different claim
# measured; looser paraphrases (0.74-0.89) stay separate items, which costs a reviewer a click,
# whereas a false merge would silently lose a claim. Compared only within one subject and namespace.
NEAR_DUPLICATE_THRESHOLD = 0.92

ACTOR = "system:consolidation"
OPEN = (Candidate.Status.REVIEW, Candidate.Status.RETRIEVABLE)
BLANKED = "[removed by consolidation]"
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Snapshot:
    """What the job saw before taking any lock."""

    candidate_id: str
    head_id: str | None  # the active confirmed record of the key, or None
    embedding: list[float] | None = None


@dataclass
class _Outcome:
    status: str
    reasons: list[dict[str, str]] = field(default_factory=list)
    conflict_record: MemoryRecord | None = None
    merged_into: Candidate | None = None
    blank: bool = False  # drop the content: it holds a secret or deleted content

    def add(self, code: str, detail: str) -> _Outcome:
        self.reasons.append({"code": code, "detail": detail})
        return self


def consolidate(candidate_id: str) -> str:
    """Consolidate one candidate; returns its status afterwards. Re-delivery is a no-op."""
    snapshot = take_snapshot(candidate_id)
    if snapshot is None:
        return _status_of(candidate_id)
    return apply_snapshot(snapshot)


def _status_of(candidate_id: str) -> str:
    return Candidate.objects.filter(pk=candidate_id).values_list("status", flat=True).first() or "missing"


def _live_head(candidate: Candidate) -> MemoryRecord | None:
    return (MemoryRecord.objects.live()
            .filter(tenant_id=candidate.tenant_id, subject_id=candidate.subject_id, namespace=candidate.namespace,
                    field=candidate.field, confidence=Confidence.CONFIRMED)
            .order_by("-created_at").first())


def take_snapshot(candidate_id: str) -> Snapshot | None:
    """Read the head and embed the sentence, outside any transaction (the model call is slow)."""
    candidate = Candidate.objects.filter(pk=candidate_id, status=Candidate.Status.PENDING).first()
    if candidate is None:
        return None
    head = _live_head(candidate)
    memory_class = class_for_namespace(tenant_id=candidate.tenant_id, namespace=candidate.namespace)
    embedding = None
    text = unseal_text(candidate.text)
    if memory_class is not None and memory_class.embed and text.strip():
        embedding = get_embedder().embed([_normalise_sentence(text)])[0]
    return Snapshot(candidate_id=candidate.pk, head_id=head.pk if head else None, embedding=embedding)


@transaction.atomic
def apply_snapshot(snapshot: Snapshot) -> str:
    """Decide and write, compare-and-set against the snapshot's head, under the key lock."""
    peek = Candidate.objects.filter(pk=snapshot.candidate_id).first()
    if peek is None or peek.status != Candidate.Status.PENDING:
        return peek.status if peek else "missing"
    # Lock order everywhere: namespace (consolidation only), key, then candidate rows. The
    # namespace lock makes two near-duplicates in different fields see each other in turn.
    _lock_namespace(peek)
    lock_record_keys(peek.tenant_id, peek.subject_id, [(peek.namespace, peek.field)])
    candidate = (Candidate.objects.select_for_update(of=("self",))
                 .select_related("subject", "source_event", "memory_class").get(pk=peek.pk))
    if candidate.status != Candidate.Status.PENDING:  # a twin delivery finished while we waited
        return candidate.status
    sealing = _sealing_class(candidate)
    candidate.fact, candidate.text, candidate.evidence = unseal_candidate(candidate)  # sealed again in _write
    _normalise(candidate)
    memory_class = class_for_namespace(tenant_id=candidate.tenant_id, namespace=candidate.namespace)
    if memory_class is not None and memory_class.encryption_required:
        sealing = memory_class
    outcome = (_tombstone_check(candidate) or _policy_check(candidate, memory_class)
               or _dedupe(candidate, snapshot) or _compare(candidate, snapshot, memory_class))
    return _write(candidate, outcome, memory_class, snapshot, sealing)


def _sealing_class(candidate: Candidate) -> MemoryClass | None:
    """The class whose encryption the stored candidate keeps: content sealed at submission stays sealed
    even if the class changed since (a class that now requires encryption seals it from here on)."""
    if candidate.memory_class is not None and candidate.memory_class.encryption_required:
        return candidate.memory_class
    return MemoryClass(encryption_required=True) if candidate_is_sealed(candidate) else None


def _lock_namespace(candidate: Candidate) -> None:
    locks.lock([f"consolidate:{candidate.tenant_id}:{candidate.subject_id}:{candidate.namespace}"])


def _normalise_sentence(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _normalise(candidate: Candidate) -> None:
    """Whitespace in the sentence and a string value; the content hash follows the normalised fact."""
    value = candidate.fact.get("value") if isinstance(candidate.fact, dict) else None
    if isinstance(value, str):
        value = _normalise_sentence(value)
    candidate.fact = {"field": candidate.field, "value": value}
    candidate.text = _normalise_sentence(candidate.text)
    candidate.content_hash = fact_hash(candidate.field, value)
    evidence: list[dict[str, Any]] = []
    for item in candidate.evidence if isinstance(candidate.evidence, list) else []:
        if isinstance(item, dict):
            evidence.append({"event_id": str(item.get("event_id") or ""), "text": str(item.get("text") or ""),
                             "at": str(item.get("at") or "")})
    candidate.evidence = evidence


def _event_ids(candidate: Candidate) -> list[str]:
    ids = [e["event_id"] for e in candidate.evidence if e.get("event_id")]
    if candidate.source_event is not None:
        ids.append(candidate.source_event.external_id)
    return sorted(set(ids))


def _tombstone_check(candidate: Candidate) -> _Outcome | None:
    if is_tombstoned(tenant_id=candidate.tenant_id, subject_external_id=candidate.subject.external_id,
                     namespace=candidate.namespace, field=candidate.field, value=candidate.fact.get("value"),
                     event_ids=_event_ids(candidate)):
        return _Outcome(Candidate.Status.DISCARDED, blank=True).add(
            "tombstoned", "tombstoned: this content or its source event was deleted")
    return None


def _policy_check(candidate: Candidate, memory_class: MemoryClass | None) -> _Outcome | None:
    """Classes can change after submission, and the detector can learn new patterns: check again."""
    findings = scan_payload({"fact": candidate.fact, "text": candidate.text, "evidence": candidate.evidence})
    if findings:
        where = "; ".join(sorted({f"{f.kind} in {f.location}" for f in findings}))
        return _Outcome(Candidate.Status.REJECTED, blank=True).add(
            "secret_detected", f"looks like a secret ({where}); the content was removed")
    if memory_class is None:
        return _Outcome(Candidate.Status.REJECTED).add(
            "class_not_allowed", f"no memory class covers namespace '{candidate.namespace}'")
    if memory_class.model_permission not in WRITE_PATH_NEEDS["candidate"]:
        return _Outcome(Candidate.Status.REJECTED).add(
            "class_not_allowed",
            f"memory class '{memory_class.name}' gives agents '{memory_class.model_permission}' permission")
    return None


def _dedupe(candidate: Candidate, snapshot: Snapshot) -> _Outcome | None:
    others = (Candidate.objects.filter(tenant_id=candidate.tenant_id, subject_id=candidate.subject_id,
                                       namespace=candidate.namespace, status__in=OPEN)
              .exclude(pk=candidate.pk))
    same = others.filter(field=candidate.field, content_hash=candidate.content_hash).order_by("created_at").first()
    if same is not None:
        return _Outcome(Candidate.Status.MERGED, merged_into=same).add(
            "duplicate", f"same field and value as {same.pk}; evidence merged into it")
    if snapshot.embedding is not None:
        near = (others.filter(embedding__isnull=False)
                .annotate(distance=CosineDistance("embedding", snapshot.embedding))
                .filter(distance__lte=1 - NEAR_DUPLICATE_THRESHOLD).order_by("distance").first())
        if near is not None:
            similarity = 1 - near.distance  # type: ignore[attr-defined]
            return _Outcome(Candidate.Status.MERGED, merged_into=near).add(
                "near_duplicate",
                f"text {similarity:.3f} similar to {near.pk} (threshold {NEAR_DUPLICATE_THRESHOLD}); evidence merged")
    return None


def _compare(candidate: Candidate, snapshot: Snapshot, memory_class: MemoryClass | None) -> _Outcome:
    head = _live_head(candidate)
    head_id = head.pk if head else None
    if head_id != snapshot.head_id:
        # Race: a confirmed record appeared (or went) between the snapshot and this lock. The job's
        # result never overwrites it: equal -> dropped, otherwise a person decides.
        if head is not None and head.content_hash == candidate.content_hash:
            return _Outcome(Candidate.Status.DISCARDED, conflict_record=head).add(
                "equal_to_active", f"equal to active record {head.pk}, which appeared during consolidation")
        return _Outcome(Candidate.Status.REVIEW, conflict_record=head).add(
            "head_changed", f"the active record changed during consolidation (was {snapshot.head_id or 'none'}, "
                            f"now {head_id or 'none'}); queued for review instead")
    if head is not None:
        if head.content_hash == candidate.content_hash:
            return _Outcome(Candidate.Status.DISCARDED, conflict_record=head).add(
                "equal_to_active", f"equal to active record {head.pk}; reinforced it")
        return _Outcome(Candidate.Status.REVIEW, conflict_record=head).add(
            "differs_from_active", f"differs from active {head.source_type} record {head.pk}")
    assert memory_class is not None  # the policy check refused classless candidates
    if not memory_class.candidates_retrievable:
        return _Outcome(Candidate.Status.REVIEW).add("no_active_record", "no active record; needs a reviewer")
    if memory_class.sensitivity == MemoryClass.Sensitivity.SENSITIVE:
        return _Outcome(Candidate.Status.REVIEW).add(
            "sensitive", f"class '{memory_class.name}' is sensitive: a person decides before anything is served")
    return _Outcome(Candidate.Status.RETRIEVABLE).add(
        "retrievable", f"no active record; class '{memory_class.name}' serves unreviewed candidates")


def _blank(candidate: Candidate) -> None:
    """Keep nothing of a secret or of deleted content: not the fact, the text, the evidence nor the event."""
    candidate.fact = {"field": candidate.field, "value": None}
    candidate.text = BLANKED
    candidate.evidence = [{"event_id": e["event_id"], "text": "", "at": e["at"]} for e in candidate.evidence]
    candidate.embedding = None
    if candidate.source_event_id:
        Event.objects.filter(pk=candidate.source_event_id).update(text="")


def _merge_evidence(target: Candidate, candidate: Candidate, sealing: MemoryClass | None) -> None:
    target = Candidate.objects.select_for_update().get(pk=target.pk)
    seen = {e.get("event_id") for e in target.evidence}
    quotes = [e for e in candidate.evidence if e.get("event_id") not in seen]
    target.evidence = [*target.evidence, *(seal_evidence(sealing, quotes) if sealing is not None else quotes)]
    target.save(update_fields=["evidence", "updated_at"])
    audit(actor=ACTOR, action="candidate.merge", object_type="candidate", object_id=target.pk,
          tenant_id=target.tenant_id, subject_id=target.subject_id,
          data={"merged": candidate.pk, "event_ids": _event_ids(candidate)})


def _keep_as_record(candidate: Candidate) -> MemoryRecord:
    """An active ``confidence="candidate"`` record, through the write gate like every record. It is
    never a precedence head, so it cannot outrank or replace a confirmed fact; a newer inference for
    the key supersedes an older candidate record. The caller holds the key lock."""
    assert candidate.source_event is not None  # a candidate's event is deleted only with the candidate
    scope = Scope.for_system(actor=ACTOR, tenant_id=candidate.tenant_id, subject_id=candidate.subject_id,
                             subject_external_id=candidate.subject.external_id, permissions=(WRITE,))
    item = RecordInput(namespace=candidate.namespace, kind=candidate.kind, field=candidate.field,
                       value=candidate.fact.get("value"), text=candidate.text,
                       event_id=candidate.source_event.external_id, source_type=SourceType.MODEL_INFERRED,
                       memory_type=candidate.memory_type)
    result = write_one(scope=scope, write=Write(item=item, action="memory.candidate_record",
                                                event=candidate.source_event, confidence=Confidence.CANDIDATE,
                                                audit={"candidate_id": candidate.pk}))
    return result.record


def _write(candidate: Candidate, outcome: _Outcome, memory_class: MemoryClass | None, snapshot: Snapshot,
           sealing: MemoryClass | None) -> str:
    result_record: MemoryRecord | None = None
    if outcome.blank:
        _blank(candidate)
    if outcome.merged_into is not None:
        _merge_evidence(outcome.merged_into, candidate, sealing)
    elif outcome.status == Candidate.Status.DISCARDED and outcome.conflict_record is not None:
        head = outcome.conflict_record
        audit(actor=ACTOR, action="memory.reinforce", object_type="memory", object_id=head.pk,
              tenant_id=head.tenant_id, subject_id=head.subject_id,
              data={"candidate_id": candidate.pk, "event_ids": _event_ids(candidate)})
    elif outcome.status == Candidate.Status.RETRIEVABLE:
        assert memory_class is not None
        result_record = _keep_as_record(candidate)
    fact, text, evidence = candidate.fact, candidate.text, candidate.evidence
    if sealing is not None:  # the candidate record above was sealed by its class; the candidate row too
        fact, text, evidence = seal_candidate(sealing, fact, text, evidence)
    # Compare-and-set on the candidate's own status: a concurrent delivery cannot also write.
    claimed = Candidate.objects.filter(pk=candidate.pk, status=Candidate.Status.PENDING).update(
        status=outcome.status, reasons=outcome.reasons, conflict_record=outcome.conflict_record,
        merged_into=outcome.merged_into, result_record=result_record, fact=fact, text=text,
        evidence=evidence, content_hash=candidate.content_hash, memory_class=memory_class,
        embedding=None if outcome.blank else snapshot.embedding, updated_at=timezone.now(),
    )
    if claimed != 1:  # cannot happen under the row lock; never write twice if it ever does
        transaction.set_rollback(True)
        return _status_of(candidate.pk)
    audit(actor=ACTOR, action="candidate.consolidate", object_type="candidate", object_id=candidate.pk,
          tenant_id=candidate.tenant_id, subject_id=candidate.subject_id,
          data={"status": outcome.status, "reasons": [r["code"] for r in outcome.reasons],
                "snapshot_head": snapshot.head_id,
                "conflict_record": outcome.conflict_record.pk if outcome.conflict_record else None,
                "merged_into": outcome.merged_into.pk if outcome.merged_into else None,
                "record": result_record.pk if result_record else None})
    return outcome.status

