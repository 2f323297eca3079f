"""Many memories for one subject, written fast through the batch write service (the API's batch path)."""

from __future__ import annotations

from typing import Any

from memory.models import SourceType, Subject
from memory.records.services import MAX_BATCH, RecordInput, memory_write_batch
from memory.scope import Scope

TOPICS = ["flights", "hotels", "meals", "meetings"]
NAMESPACES = ["user/travel_preferences", "episodes"]


def agent_scope(subject: Subject) -> Scope:
    return Scope(tenant_id=subject.tenant_id, subject_id=subject.pk, subject_external_id=subject.external_id,
                 permissions=frozenset({"read", "write"}), namespaces=None, actor="agent_key:bulk-test")


def item(i: int, *, tag: str = "") -> RecordInput:
    """Record ``i``: its topic is TOPICS[i % 4], its namespace NAMESPACES[i % 2]; every 5th is a booking."""
    booking = i % 5 == 0
    return RecordInput(
        namespace=NAMESPACES[i % 2], kind="note", field=f"note_{tag}{i}", value=f"value {i}",
        text=f"Memory number {i} about {TOPICS[i % 4]} {tag}".strip(), event_id=f"evt_bulk_{tag}{i}",
        source_type=SourceType.SYSTEM_OF_RECORD if booking else SourceType.EXPLICIT_USER_STATEMENT,
        event_text="" if booking else f"I told you about {TOPICS[i % 4]} ({i})",
        source_ref={"system": "booking", "id": f"BK-{i}"} if booking else None,
    )


def write_many(subject: Subject, n: int, *, tag: str = "") -> list[str]:
    """``n`` records for ``subject`` in batches of 500; returns their ids in write order."""
    scope = agent_scope(subject)
    ids: list[str] = []
    for start in range(0, n, MAX_BATCH):
        batch = [item(i, tag=tag) for i in range(start, min(n, start + MAX_BATCH))]
        results = memory_write_batch(scope=scope, items=batch)
        assert all(r.error is None for r in results), [r.error for r in results if r.error][:3]
        ids += [r.record.pk for r in results if r.record is not None]
    return ids


def subject_of(agent: Any) -> Subject:
    return Subject.objects.get(pk=agent.subject.pk)
