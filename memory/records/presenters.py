"""Output shapes shared by every endpoint that returns a record (the contract's record shape)."""

from __future__ import annotations

from typing import Any, TypedDict

from memory.content import unseal
from memory.models import MemoryRecord, RecordStatus
from memory.records.selectors import effective_status


class SourcePayload(TypedDict, total=False):
    type: str
    event_id: str | None
    reference: dict[str, Any] | None


class RecordPayload(TypedDict):
    memory_id: str
    subject_id: str
    namespace: list[str]
    kind: str
    type: str
    fact: dict[str, Any]
    text: str
    source: SourcePayload
    confidence: str
    sensitivity: str
    memory_class: str
    status: str
    status_reason: str
    valid_from: str | None
    valid_until: str | None
    created_at: str | None
    supersedes: str | None
    superseded_by: str | None


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def record_payload(record: MemoryRecord) -> RecordPayload:
    source: SourcePayload = {"type": record.source_type,
                             "event_id": record.source_event.external_id if record.source_event else None}
    if record.source_ref:
        source["reference"] = record.source_ref
    # A record whose deletion was requested shows no content, even before its job blanks the row.
    fact, text = ({}, "") if record.status == RecordStatus.DELETED else unseal(record)
    return {
        "memory_id": record.pk,
        "subject_id": record.subject.external_id,
        "namespace": record.namespace_list,
        "kind": record.kind,
        "type": record.memory_type,
        "fact": fact,
        "text": text,
        "source": source,
        "confidence": record.confidence,
        "sensitivity": record.sensitivity,
        "memory_class": record.memory_class.name,
        "status": effective_status(record),
        "status_reason": record.status_reason,
        "valid_from": _iso(record.valid_from),
        "valid_until": _iso(record.valid_until),
        "created_at": _iso(record.created_at),
        "supersedes": record.supersedes_id,
        "superseded_by": record.superseded_by_id,
    }
