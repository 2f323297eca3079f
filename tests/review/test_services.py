"""Review services: approve, edit and approve, reject, resolve conflicts, bulk; audited, precedence applies."""

from __future__ import annotations

import pytest

from memory.consolidation import consolidate, review
from memory.errors import Conflict as ConflictError
from memory.errors import InvalidInput, NotFound, SecretDetected
from memory.identity.access import reviewer_of
from memory.models import AuditEntry, Candidate, MemoryClass, MemoryRecord
from tests.consolidation.helpers import INFERRED, state, submit
from tests.review.conftest import in_review, org_conflict

pytestmark = pytest.mark.django_db


def test_it_approves_into_a_confirmed_model_inferred_record_with_the_reviewer_as_actor(agent, rita):
    candidate = in_review(agent)

    approval = review.candidate_approve(reviewer=reviewer_of(rita), candidate_id=candidate.pk)

    record = approval.result.record
    assert approval.active and record.confidence == "confirmed" and record.source_type == "model_inferred"
    assert record.fact == {"field": "seat_preference", "value": "aisle"}
    assert record.source_event_id == candidate.source_event_id
    assert approval.candidate.status == "approved" and approval.candidate.result_record_id == record.pk
    assert approval.candidate.decided_by_id == rita.pk
    actor = f"user:{rita.pk}"
    assert AuditEntry.objects.filter(action="memory.approve", object_id=record.pk, actor=actor).exists()
    assert AuditEntry.objects.filter(action="candidate.approve", object_id=candidate.pk, actor=actor).exists()


def test_an_approved_inference_never_outranks_an_explicit_statement(agent, rita):
    said = state(agent, value="window", text="Prefers window seats", event_id="evt_said")
    candidate = in_review(agent, value="aisle", event_id="evt_inferred")
    assert candidate.conflict_record_id == said

    approval = review.candidate_approve(reviewer=reviewer_of(rita), candidate_id=candidate.pk)

    assert not approval.active
    assert approval.result.record.status == "superseded" and approval.result.record.superseded_by_id == said
    assert MemoryRecord.objects.get(pk=said).status == "active"


def test_it_edits_and_approves_with_the_reviewers_words(agent, rita):
    candidate = in_review(agent)

    approval = review.candidate_edit_approve(reviewer=reviewer_of(rita), candidate_id=candidate.pk,
                                             value="aisle, front rows",
                                             text="Prefers aisle seats near the front")

    assert approval.result.record.fact["value"] == "aisle, front rows"
    assert approval.result.record.text == "Prefers aisle seats near the front"
    assert AuditEntry.objects.get(action="candidate.edit_approve", object_id=candidate.pk).data["edited"] is True


def test_it_refuses_a_secret_typed_into_an_edit_and_writes_nothing(agent, rita):
    candidate = in_review(agent)

    with pytest.raises(SecretDetected):
        review.candidate_edit_approve(reviewer=reviewer_of(rita), candidate_id=candidate.pk, value="aisle",
                                      text="Aisle; my password is hunter2-hunter2")

    assert not MemoryRecord.objects.exists()
    assert Candidate.objects.get(pk=candidate.pk).status == "review"


def test_an_approved_record_retires_the_unreviewed_candidate_record_of_its_key(agent, rita, tenant):
    retrievable = submit(agent, namespace=INFERRED, field="diet", value="vegetarian", text="Is vegetarian",
                         event_id="evt_a")
    assert consolidate(retrievable.pk) == "retrievable"
    retrievable.refresh_from_db()
    MemoryClass.objects.filter(tenant=tenant, name="user_inferred").update(candidates_retrievable=False)
    candidate = in_review(agent, namespace=INFERRED, field="diet", value="vegan", text="Is vegan", event_id="evt_b")

    approval = review.candidate_approve(reviewer=reviewer_of(rita), candidate_id=candidate.pk)

    old = MemoryRecord.objects.get(pk=retrievable.result_record_id)
    assert old.status == "superseded" and old.superseded_by_id == approval.result.record.pk
    listed = agent.get("/api/v1/memories", {"namespace": "user/inferred", "status": "active"}).json()["results"]
    assert [(r["fact"]["value"], r["confidence"]) for r in listed] == [("vegan", "confirmed")]


def test_it_rejects_with_a_reason_kept_on_the_candidate_not_in_the_audit(agent, rita):
    candidate = in_review(agent)

    rejected = review.candidate_reject(reviewer=reviewer_of(rita), candidate_id=candidate.pk,
                                       reason="  guessed from one joke ")

    assert rejected.status == "rejected"
    assert rejected.reasons[-1] == {"code": "rejected_by_reviewer", "detail": "guessed from one joke"}
    entry = AuditEntry.objects.get(action="candidate.reject", object_id=candidate.pk)
    assert entry.actor == f"user:{rita.pk}" and "joke" not in str(entry.data)


def test_it_needs_a_reason_to_reject(agent, rita):
    candidate = in_review(agent)

    with pytest.raises(InvalidInput):
        review.candidate_reject(reviewer=reviewer_of(rita), candidate_id=candidate.pk, reason="   ")


def test_it_refuses_to_decide_twice(agent, rita):
    candidate = in_review(agent)
    review.candidate_approve(reviewer=reviewer_of(rita), candidate_id=candidate.pk)

    with pytest.raises(ConflictError) as exc:
        review.candidate_reject(reviewer=reviewer_of(rita), candidate_id=candidate.pk, reason="changed my mind")
    assert exc.value.code == "already_decided"
    assert MemoryRecord.objects.count() == 1


def test_another_tenants_reviewer_cannot_decide(agent, gus):
    candidate = in_review(agent)

    with pytest.raises(NotFound):
        review.candidate_approve(reviewer=reviewer_of(gus), candidate_id=candidate.pk)
    assert Candidate.objects.get(pk=candidate.pk).status == "review"


def test_keep_current_supersedes_the_proposed_org_record(agent, rita):
    conflict = org_conflict(agent)
    current, proposed = sorted(conflict.records.all(), key=lambda r: r.created_at)

    review.conflict_keep_current(reviewer=reviewer_of(rita), conflict_id=conflict.pk)

    conflict.refresh_from_db()
    assert conflict.status == "resolved" and conflict.resolution == "kept current"
    assert MemoryRecord.objects.get(pk=current.pk).status == "active"
    assert MemoryRecord.objects.get(pk=proposed.pk).status == "superseded"
    assert AuditEntry.objects.get(action="conflict.keep_current").data == {"kept": current.pk,
                                                                           "superseded": [proposed.pk]}


def test_use_proposed_supersedes_the_current_org_record(agent, rita):
    conflict = org_conflict(agent)
    current, proposed = sorted(conflict.records.all(), key=lambda r: r.created_at)

    review.conflict_use_proposed(reviewer=reviewer_of(rita), conflict_id=conflict.pk)

    assert MemoryRecord.objects.get(pk=current.pk).status == "superseded"
    head = MemoryRecord.objects.get(pk=proposed.pk)
    assert head.status == "active" and head.supersedes_id == current.pk


def test_resolving_a_conflict_audits_each_record_it_changes(agent, rita):
    """The records change through the write gate: one audit row per record, with the reviewer as actor."""
    conflict = org_conflict(agent)
    current, proposed = sorted(conflict.records.all(), key=lambda r: r.created_at)

    review.conflict_use_proposed(reviewer=reviewer_of(rita), conflict_id=conflict.pk)

    rows = {row.object_id: row for row in AuditEntry.objects.filter(action="memory.conflict_resolve")}
    assert sorted(rows) == sorted([current.pk, proposed.pk])
    assert {row.actor for row in rows.values()} == {f"user:{rita.pk}"}
    assert rows[current.pk].data == {"status": "superseded", "superseded_by": proposed.pk, "conflict_id": conflict.pk}
    assert rows[proposed.pk].data == {"supersedes": current.pk, "conflict_id": conflict.pk}


def test_bulk_approve_reports_each_item(agent, rita):
    a = in_review(agent, field="seat", event_id="evt_a")
    b = in_review(agent, field="meal", value="vegetarian", text="Orders vegetarian meals", event_id="evt_b")
    review.candidate_reject(reviewer=reviewer_of(rita), candidate_id=b.pk, reason="no")

    result = review.candidates_bulk_approve(reviewer=reviewer_of(rita), candidate_ids=[a.pk, b.pk, "cand_missing"])

    assert result.done == [a.pk]
    assert set(result.failed) == {b.pk, "cand_missing"}
    assert Candidate.objects.get(pk=a.pk).status == "approved"


def test_bulk_reject(agent, rita):
    a = in_review(agent, field="seat", event_id="evt_a")
    b = in_review(agent, field="meal", value="vegetarian", text="Orders vegetarian meals", event_id="evt_b")

    result = review.candidates_bulk_reject(reviewer=reviewer_of(rita), candidate_ids=[a.pk, b.pk], reason="duplicates")

    assert result.done == [a.pk, b.pk]
    assert set(Candidate.objects.values_list("status", flat=True)) == {"rejected"}
