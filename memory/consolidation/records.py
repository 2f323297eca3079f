"""Low-authority candidate records: what a class with ``candidates_retrievable`` may serve unreviewed."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from memory.audit import audit
from memory.content import seal
from memory.indexing import refresh_search_vectors
from memory.models import Candidate, Confidence, MemoryClass, MemoryRecord, RecordStatus, SourceType
from memory.tasks import INTERACTIVE, enqueue


def store_candidate_record(*, candidate: Candidate, memory_class: MemoryClass, actor: str) -> MemoryRecord:
    """Insert an active ``confidence="candidate"`` record for ``candidate``. Caller holds the key lock.

    Such a record is never a precedence head (heads are confirmed records), so it cannot outrank or
    replace any confirmed fact. A newer inference for the same key supersedes an older candidate
    record, as a newer record of the same authority does.
    """
    now = timezone.now()
    valid_until = now + memory_class.default_ttl if memory_class.default_ttl is not None else None
    fact, text = seal(memory_class, {"field": candidate.field, "value": candidate.fact.get("value")}, candidate.text)
    older = list(MemoryRecord.objects.live().filter(
        tenant_id=candidate.tenant_id, subject_id=candidate.subject_id, namespace=candidate.namespace,
        field=candidate.field, confidence=Confidence.CANDIDATE).values_list("pk", flat=True))
    record = MemoryRecord.objects.create(
        tenant_id=candidate.tenant_id, subject_id=candidate.subject_id, namespace=candidate.namespace,
        kind=candidate.kind, memory_type=candidate.memory_type, field=candidate.field, fact=fact, text=text,
        source_type=SourceType.MODEL_INFERRED, source_event_id=candidate.source_event_id,
        confidence=Confidence.CANDIDATE, sensitivity=memory_class.sensitivity, memory_class=memory_class,
        valid_from=now, valid_until=valid_until, content_hash=candidate.content_hash,
        supersedes_id=older[0] if older else None,
    )
    if older:
        MemoryRecord.objects.filter(pk__in=older).update(
            status=RecordStatus.SUPERSEDED, superseded_by=record, status_reason="newer inferred candidate")
    refresh_search_vectors([record.pk])
    audit(actor=actor, action="memory.candidate_record", object_type="memory", object_id=record.pk,
          tenant_id=candidate.tenant_id, subject_id=candidate.subject_id,
          data={"candidate_id": candidate.pk, "superseded": older})
    if memory_class.embed:
        transaction.on_commit(lambda: enqueue("memory.tasks.embed_records", [record.pk], queue=INTERACTIVE))
    return record
