"""Tombstones: a delayed consolidation job or a replayed write cannot bring deleted content back."""

from __future__ import annotations

import pytest

from memory.consolidation import apply_snapshot, consolidate, take_snapshot
from memory.models import Candidate, MemoryRecord, RecordStatus, Tombstone
from tests.conftest import memory_body
from tests.deletion.helpers import run_job, tables_containing

pytestmark = pytest.mark.django_db

INFERRED = {"namespace": ["user", "inferred"], "kind": "trait",
            "fact": {"field": "diet", "value": "pescatarian zq"}, "text": "Seems to be pescatarian zq"}


def _candidate(agent, event_id: str) -> str:
    response = agent.post("/api/v1/candidates", memory_body(
        **INFERRED, source={"type": "model_inferred", "event_id": event_id, "text": "ordered fish again zq"}))
    assert response.status_code == 202, response.json()
    return response.json()["candidate_id"]


def _live_with_value() -> int:
    return MemoryRecord.objects.exclude(status=RecordStatus.DELETED).filter(fact__value="pescatarian zq").count()


def test_a_consolidation_job_holding_the_candidate_redelivered_after_deletion_recreates_nothing(agent):
    first = _candidate(agent, "evt_a")
    assert consolidate(first) == "retrievable"
    record_id = Candidate.objects.get(pk=first).result_record_id
    twin = _candidate(agent, "evt_b")
    held = take_snapshot(twin)  # a job that read the candidate before the deletion...
    assert held is not None

    run_job(agent.delete(f"/api/v1/memories/{record_id}").json()["deletion_id"])

    assert apply_snapshot(held) in ("missing", "discarded")  # ...and is delivered after it
    assert consolidate(first) in ("missing", "discarded")  # the original job re-delivered
    assert _live_with_value() == 0
    assert tables_containing("pescatarian zq") == []


def test_the_same_event_replayed_is_refused_and_new_words_for_the_same_content_are_discarded(agent):
    first = _candidate(agent, "evt_a")
    consolidate(first)
    record_id = Candidate.objects.get(pk=first).result_record_id
    run_job(agent.delete(f"/api/v1/memories/{record_id}").json()["deletion_id"])

    replay = agent.post("/api/v1/candidates", memory_body(
        **INFERRED, source={"type": "model_inferred", "event_id": "evt_a", "text": "ordered fish again zq"}))
    assert replay.status_code == 409 and replay.json()["code"] == "tombstoned"

    again = _candidate(agent, "evt_c")
    assert consolidate(again) == "discarded"
    assert "tombstoned" in [r["code"] for r in Candidate.objects.get(pk=again).reasons]
    assert _live_with_value() == 0


def test_an_explicit_write_replaying_a_deleted_event_is_refused(agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    run_job(agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"])

    replay = agent.post("/api/v1/memories", memory_body())

    assert replay.status_code == 409 and replay.json()["code"] == "tombstoned"


def test_tombstones_hold_keyed_hashes_only_and_expire_after_the_retry_window(agent, settings):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    run_job(agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"])

    stone = Tombstone.objects.get(memory_id=memory_id)
    assert len(stone.subject_hash) == 64 and len(stone.content_hash) == 64 and len(stone.event_hashes[0]) == 64
    assert "usr_owner" not in str(stone.__dict__) and "aisle" not in str(stone.__dict__)
    assert 29 <= (stone.expires_at - stone.deleted_at).days <= 30
