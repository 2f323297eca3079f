"""consolidate(candidate_id): normalise, tombstones, policy, dedupe, compare with the active record."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.consolidation import apply_snapshot, consolidate, take_snapshot
from memory.models import AuditEntry, Candidate, Confidence, Event, MemoryClass, MemoryRecord, Tombstone
from memory.tombstones import content_hash_for, event_hash, subject_hash
from tests.consolidation.helpers import INFERRED, state, submit

pytestmark = pytest.mark.django_db


def codes(candidate: Candidate) -> list[str]:
    candidate.refresh_from_db()
    return [r["code"] for r in candidate.reasons]


def test_it_queues_a_candidate_without_an_active_record_for_review(agent):
    candidate = submit(agent)

    assert consolidate(candidate.pk) == "review"

    assert codes(candidate) == ["no_active_record"]
    assert candidate.conflict_record is None
    assert not MemoryRecord.objects.exists()
    assert AuditEntry.objects.filter(action="candidate.consolidate", object_id=candidate.pk,
                                     actor="system:consolidation", data__status="review").exists()


def test_it_keeps_a_retrievable_low_authority_record_where_the_class_allows(agent):
    candidate = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian")

    assert consolidate(candidate.pk) == "retrievable"

    candidate.refresh_from_db()
    record = candidate.result_record
    assert record is not None and record.status == "active"
    assert record.confidence == Confidence.CANDIDATE and record.source_type == "model_inferred"
    assert record.fact == {"field": "diet", "value": "vegetarian"}
    assert record.valid_until is not None  # user_inferred has a 180-day default TTL
    listed = agent.get("/api/v1/memories", {"namespace": "user/inferred"}).json()["results"]
    assert [(r["memory_id"], r["confidence"]) for r in listed] == [(record.pk, "candidate")]


def test_it_never_serves_an_unreviewed_candidate_of_a_sensitive_class(agent, tenant):
    MemoryClass.objects.filter(tenant=tenant, name="user_inferred").update(sensitivity="sensitive")
    candidate = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian")

    assert consolidate(candidate.pk) == "review"
    assert codes(candidate) == ["sensitive"]
    assert not MemoryRecord.objects.exists()


def test_it_reinforces_and_closes_a_candidate_equal_to_the_active_record(agent):
    memory_id = state(agent, value="aisle", event_id="evt_said")
    candidate = submit(agent, value="  Aisle ", event_id="evt_inferred")  # normalised: same fact

    assert consolidate(candidate.pk) == "discarded"

    assert codes(candidate) == ["equal_to_active"]
    assert "equal to active record" in candidate.reasons[0]["detail"]
    reinforce = AuditEntry.objects.get(action="memory.reinforce", object_id=memory_id)
    assert reinforce.data["candidate_id"] == candidate.pk
    assert MemoryRecord.objects.count() == 1


def test_it_attaches_the_conflicting_active_record_when_the_value_differs(agent):
    memory_id = state(agent, value="window", text="Prefers window seats", event_id="evt_said")
    candidate = submit(agent, value="aisle", event_id="evt_inferred")

    assert consolidate(candidate.pk) == "review"

    assert codes(candidate) == ["differs_from_active"]
    assert candidate.conflict_record_id == memory_id


def test_it_merges_the_provenance_of_a_same_valued_duplicate(agent):
    first = submit(agent, event_id="evt_a", said="I'd rather not climb over people.")
    consolidate(first.pk)
    second = submit(agent, value="AISLE", text="Likes aisle seats", event_id="evt_b", said="Aisle again, please.")

    assert consolidate(second.pk) == "merged"

    second.refresh_from_db()
    first.refresh_from_db()
    assert second.merged_into_id == first.pk and codes(second) == ["duplicate"]
    assert [e["event_id"] for e in first.evidence] == ["evt_a", "evt_b"]
    assert first.evidence[1]["text"] == "Aisle again, please."
    assert first.status == "review"
    assert AuditEntry.objects.filter(action="candidate.merge", object_id=first.pk, data__merged=second.pk).exists()


def test_it_merges_a_near_duplicate_sentence_by_embedding_similarity(agent):
    first = submit(agent, field="seat", value="aisle", text="Prefers aisle seats", event_id="evt_a")
    consolidate(first.pk)
    second = submit(agent, field="seat_preference", value="aisle seat", text="Prefers an aisle seat",
                    event_id="evt_b")

    assert consolidate(second.pk) == "merged"
    assert codes(second) == ["near_duplicate"]
    assert second.merged_into_id == first.pk


def test_it_keeps_different_claims_apart_even_when_the_sentences_are_close(agent):
    first = submit(agent, field="flight_time", value="morning", text="Prefers morning flights", event_id="evt_a")
    consolidate(first.pk)
    second = submit(agent, field="flight_time", value="evening", text="Prefers evening flights", event_id="evt_b")

    assert consolidate(second.pk) == "review"
    assert Candidate.objects.filter(status="review").count() == 2


def test_it_rejects_a_candidate_whose_class_no_longer_accepts_proposals(agent, tenant):
    candidate = submit(agent)
    MemoryClass.objects.filter(tenant=tenant, name="travel_preferences").update(model_permission="read")

    assert consolidate(candidate.pk) == "rejected"
    assert codes(candidate) == ["class_not_allowed"]
    assert "'read' permission" in candidate.reasons[0]["detail"]


def test_it_rejects_a_secret_in_the_evidence_and_keeps_it_nowhere(agent):
    candidate = submit(agent, evidence=[{"event_id": "evt_chat", "text": "seat talk", "at": "2026-01-01"}])
    # A row stored before the detector knew this pattern: consolidation scans again.
    secret = "my password is hunter2-hunter2"
    Candidate.objects.filter(pk=candidate.pk).update(
        evidence=[*candidate.evidence[:1], {"event_id": "evt_chat", "text": secret, "at": "2026-01-01"}])
    Event.objects.filter(pk=candidate.source_event_id).update(text=secret)

    assert consolidate(candidate.pk) == "rejected"

    assert codes(candidate) == ["secret_detected"]
    assert "password in evidence[1].text" in candidate.reasons[0]["detail"]
    assert "hunter2" not in str(Candidate.objects.filter(pk=candidate.pk).values().get())
    assert Event.objects.get(pk=candidate.source_event_id).text == ""
    assert not AuditEntry.objects.filter(data__icontains="hunter2").exists()


def test_it_drops_a_candidate_whose_content_was_deleted(agent, tenant):
    candidate = submit(agent)
    Tombstone.objects.create(tenant=tenant, subject_hash=subject_hash(tenant.pk, "usr_owner"),
                             content_hash=content_hash_for("user/travel_preferences", "seat_preference", "aisle"),
                             event_hashes=[event_hash("evt_old")], expires_at=timezone.now() + timedelta(days=1))

    assert consolidate(candidate.pk) == "discarded"
    assert codes(candidate) == ["tombstoned"]
    assert candidate.fact["value"] is None and "aisle" not in candidate.text


def test_it_does_nothing_new_when_the_same_task_is_delivered_again(agent):
    first = submit(agent, event_id="evt_a")
    consolidate(first.pk)
    second = submit(agent, event_id="evt_b")
    assert consolidate(second.pk) == "merged"
    audits = AuditEntry.objects.count()

    assert consolidate(second.pk) == "merged"
    assert consolidate(first.pk) == "review"

    first.refresh_from_db()
    assert [e["event_id"] for e in first.evidence] == ["evt_a", "evt_b"]
    assert AuditEntry.objects.count() == audits


def test_it_never_overwrites_a_confirmed_record_written_after_its_snapshot(agent, tenant):
    MemoryClass.objects.filter(tenant=tenant, name="user_inferred").update(model_permission="write")
    candidate = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian")
    snapshot = take_snapshot(candidate.pk)
    assert snapshot is not None and snapshot.head_id is None

    # The person says otherwise while the job is between snapshot and commit.
    memory_id = state(agent, namespace=INFERRED, field="diet", value="vegan", text="Is vegan", event_id="evt_said")
    assert apply_snapshot(snapshot) == "review"

    assert codes(candidate) == ["head_changed"]
    assert candidate.conflict_record_id == memory_id
    assert not MemoryRecord.objects.filter(confidence=Confidence.CANDIDATE).exists()  # no retrievable record
    head = MemoryRecord.objects.get(pk=memory_id)
    assert head.status == "active" and head.fact["value"] == "vegan"


def test_it_drops_its_result_when_the_record_that_appeared_says_the_same(agent, tenant):
    MemoryClass.objects.filter(tenant=tenant, name="user_inferred").update(model_permission="write")
    candidate = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian")
    snapshot = take_snapshot(candidate.pk)
    state(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian", event_id="evt_said")

    assert apply_snapshot(snapshot) == "discarded"
    assert codes(candidate) == ["equal_to_active"]
    assert "appeared during consolidation" in candidate.reasons[0]["detail"]


def test_the_task_entry_point_runs_the_pipeline_in_sync_mode(agent, tenant):
    from django_q.tasks import async_task

    candidate = submit(agent)
    MemoryClass.objects.filter(tenant=tenant, name="travel_preferences").update(model_permission="none")

    async_task("memory.consolidation.tasks.consolidate_candidate", candidate.pk, sync=True)

    assert codes(candidate) == ["class_not_allowed"]
    assert candidate.status == "rejected"


@pytest.mark.parametrize("path", ["single", "batch"])
def test_an_explicit_statement_retires_the_unreviewed_candidate_record_of_its_field(agent, tenant, path):
    # A class that serves unreviewed inferences and also takes the user's own statements.
    MemoryClass.objects.filter(tenant=tenant, name="user_inferred").update(model_permission="write")
    candidate = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian")
    assert consolidate(candidate.pk) == "retrievable"
    guessed = Candidate.objects.get(pk=candidate.pk).result_record

    said = {"namespace": INFERRED, "kind": "preference", "fact": {"field": "diet", "value": "vegan"},
            "text": "Is vegan", "source": {"type": "explicit_user_statement", "event_id": "evt_vegan"}}
    if path == "single":
        response = agent.post("/api/v1/memories", said)
        assert response.status_code == 201, response.json()
        confirmed_id = response.json()["memory_id"]
    else:
        response = agent.post("/api/v1/memories/batch", {"items": [said]})
        assert response.status_code == 200, response.json()
        confirmed_id = response.json()["results"][0]["memory_id"]

    guessed.refresh_from_db()
    assert (guessed.status, guessed.superseded_by_id) == ("superseded", confirmed_id)
    listed = agent.get("/api/v1/memories", {"namespace": "user/inferred", "status": "active"}).json()["results"]
    assert [(r["memory_id"], r["confidence"]) for r in listed] == [(confirmed_id, "confirmed")]
    packets = agent.post("/api/v1/retrieve", {"query": "What does the user eat?"}).json()["packets"]
    assert guessed.pk not in [p["memory_id"] for p in packets]
    assert AuditEntry.objects.filter(object_id=confirmed_id, data__retired_candidates=[guessed.pk]).exists()
