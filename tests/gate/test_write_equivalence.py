"""One write gate: the same input through a single write, a batch and a correction leaves the same
rows, the same audit entries and the same sealing; the same bad input gets the same refusal.

Each path writes into its own subject, on top of an earlier record of the same key, so all three
supersede one record and the rows can be compared field by field.
"""

from __future__ import annotations

from typing import Any

import pytest

from memory.content import TEXT_PREFIX, unseal, unseal_text
from memory.models import AuditEntry, MemoryRecord
from tests.conftest import memory_body
from tests.deletion.helpers import tables_containing

pytestmark = pytest.mark.django_db

MARKER = "zqequivalentwords"


def _item(namespace: list[str], event_id: str) -> dict[str, Any]:
    return memory_body(namespace=namespace, kind="health", fact={"field": "allergy", "value": f"{MARKER} nuts"},
                       text=f"Allergic to {MARKER} nuts",
                       source={"type": "explicit_user_statement", "event_id": event_id,
                               "text": f"I said {MARKER} nuts"})


def _earlier(agent: Any, namespace: list[str]) -> str:
    response = agent.post("/api/v1/memories", memory_body(
        namespace=namespace, kind="health", fact={"field": "allergy", "value": "pollen"}, text="Allergic to pollen",
        source={"type": "explicit_user_statement", "event_id": "evt_before"}))
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]


def _through(path: str, agent: Any, namespace: list[str]) -> str:
    earlier = _earlier(agent, namespace)
    if path == "single":
        response = agent.post("/api/v1/memories", _item(namespace, "evt_x"))
        assert response.status_code == 201, response.json()
        return response.json()["memory_id"]
    if path == "batch":
        response = agent.post("/api/v1/memories/batch", {"items": [_item(namespace, "evt_x")]})
        assert response.status_code == 200 and response.json()["created"] == 1, response.json()
        return response.json()["results"][0]["memory_id"]
    response = agent.post(f"/api/v1/memories/{earlier}/correct", {
        "fact": {"value": f"{MARKER} nuts"}, "text": f"Allergic to {MARKER} nuts",
        "source": {"text": f"I said {MARKER} nuts"}})
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]


def _row(memory_id: str) -> dict[str, Any]:
    """What a path leaves, without ids, times and the subject."""
    record = MemoryRecord.objects.select_related("source_event", "memory_class").get(pk=memory_id)
    fact, text = unseal(record)
    event = record.source_event
    assert event is not None
    audit = list(AuditEntry.objects.filter(object_id=memory_id))
    assert len(audit) == 1, [a.action for a in audit]  # one audit row per write
    previous = MemoryRecord.objects.get(pk=record.supersedes_id)
    return {
        "namespace": record.namespace, "kind": record.kind, "field": record.field, "type": record.memory_type,
        "fact": fact, "text": text, "source_type": record.source_type, "confidence": record.confidence,
        "sensitivity": record.sensitivity, "class": record.memory_class.name, "status": record.status,
        "content_hash": record.content_hash, "ttl": record.valid_until and record.valid_until - record.valid_from,
        "sealed": (TEXT_PREFIX in record.text, "sealed" in record.fact, event.text.startswith(TEXT_PREFIX)),
        "indexed": record.search_vector is not None,
        "event": (event.source_type, unseal_text(event.text)),
        "supersedes": (previous.status, previous.superseded_by_id == memory_id),
        "audit": (audit[0].actor.split(":")[0], sorted(set(audit[0].data) - {"corrects"}),
                  audit[0].data["outcome"], audit[0].data["superseded"] == [previous.pk]),
    }


@pytest.mark.parametrize("namespace", [["user", "medical"], ["user", "travel_preferences"]],
                         ids=["encrypted", "plain"])
def test_single_batch_and_correction_leave_the_same_rows_audit_and_sealing(make_agent, tenant, vault, namespace):
    rows = {path: _row(_through(path, make_agent(tenant, f"usr_{path}"), namespace))
            for path in ("single", "batch", "correction")}

    assert rows["single"] == rows["batch"] == rows["correction"], rows
    encrypted = namespace == ["user", "medical"]
    assert rows["single"]["sealed"] == (encrypted, encrypted, encrypted)
    assert rows["single"]["indexed"] is not encrypted
    if encrypted:
        hits = tables_containing(MARKER)
        assert hits == [], ", ".join(hits)
    actions = {a.object_id: a.action for a in AuditEntry.objects.filter(action__in=["memory.write", "memory.correct"])}
    assert sorted(actions.values()).count("memory.correct") == 1


BAD_ITEMS = {
    "namespace_forbidden": memory_body(namespace=["org"]),
    "class_not_allowed": memory_body(namespace=["user", "inferred"]),
    "secret_detected": memory_body(text="my password is hunter22 and more"),
    "idempotency_conflict": memory_body(source={"type": "explicit_user_statement", "event_id": "evt_seat_1"},
                                        text="A different sentence"),
}


@pytest.mark.parametrize("code", sorted(BAD_ITEMS))
def test_single_and_batch_refuse_the_same_input_with_the_same_code(make_agent, tenant, code):
    agent = make_agent(tenant, "usr_owner", namespaces=["user"])
    assert agent.post("/api/v1/memories", memory_body()).status_code == 201  # evt_seat_1 is used

    single = agent.post("/api/v1/memories", BAD_ITEMS[code])
    batch = agent.post("/api/v1/memories/batch", {"items": [BAD_ITEMS[code]]})

    assert single.json()["code"] == code
    item = batch.json()["results"][0]
    assert (item["code"], item["http_status"]) == (code, single.status_code)
    assert MemoryRecord.objects.count() == 1
