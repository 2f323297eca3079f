"""The precedence policy: authority first, then recency within one authority; conflicts are surfaced."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from memory.identity.services import subject_get_or_create
from memory.models import Conflict, MemoryRecord
from memory.policy.precedence import AUTHORITY_ORDER, Outcome, decide, outranks
from memory.records.services import RecordInput, memory_write, outcome_record
from memory.scope import ALL_PERMISSIONS, Scope


def test_the_authority_order_is_exactly_the_contracts():
    assert AUTHORITY_ORDER == ("system_of_record", "explicit_user_statement", "org_record", "verified_outcome",
                               "model_inferred", "summary")


@pytest.mark.parametrize("higher, lower", list(zip(AUTHORITY_ORDER, AUTHORITY_ORDER[1:], strict=False)))
def test_each_authority_outranks_the_next(higher, lower):
    assert outranks(higher, lower) and not outranks(lower, higher)


class _Head:
    def __init__(self, source_type: str, content_hash: str = "h") -> None:
        self.source_type, self.content_hash = source_type, content_hash


def test_decide_covers_every_case():
    assert decide(new_source_type="summary", new_content_hash="x", heads=[]).outcome is Outcome.ACTIVATE
    assert decide(new_source_type="system_of_record", new_content_hash="x",
                  heads=[_Head("explicit_user_statement")]).outcome is Outcome.SUPERSEDE
    assert decide(new_source_type="model_inferred", new_content_hash="x",
                  heads=[_Head("verified_outcome")]).outcome is Outcome.KEEP_INACTIVE
    assert decide(new_source_type="explicit_user_statement", new_content_hash="x",
                  heads=[_Head("explicit_user_statement")]).outcome is Outcome.SUPERSEDE
    assert decide(new_source_type="org_record", new_content_hash="x",
                  heads=[_Head("org_record", "y")]).outcome is Outcome.CONFLICT
    assert decide(new_source_type="org_record", new_content_hash="x",
                  heads=[_Head("org_record", "x")]).outcome is Outcome.SUPERSEDE


@pytest.fixture
def scope(tenant):
    subject = subject_get_or_create(tenant=tenant, external_id="usr_owner")
    return Scope(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=subject.external_id,
                 permissions=frozenset(ALL_PERMISSIONS), namespaces=None, actor="test")


def write(scope, value, event, source_type="explicit_user_statement", field="seat_preference", **extra):
    item = RecordInput(namespace=extra.pop("namespace", "user/travel_preferences"), kind="preference", field=field,
                       value=value, text=f"Prefers {value} seats", event_id=event, source_type=source_type, **extra)
    service = memory_write if source_type == "explicit_user_statement" else outcome_record
    return service(scope=scope, item=item).record


@pytest.mark.django_db
def test_a_newer_statement_supersedes_the_older_with_links_both_ways(scope):
    old = write(scope, "aisle", "e1")
    new = write(scope, "window", "e2")

    old.refresh_from_db()
    assert (old.status, old.superseded_by_id) == ("superseded", new.pk)
    assert (new.status, new.supersedes_id) == ("active", old.pk)


@pytest.mark.django_db
def test_a_lower_authority_never_supersedes_a_higher_one(scope):
    stated = write(scope, "aisle", "e1")
    observed = write(scope, "window", "e2", source_type="verified_outcome")

    stated.refresh_from_db()
    assert stated.status == "active"
    assert observed.status == "superseded"
    assert observed.superseded_by_id == stated.pk
    assert "outranks" in observed.status_reason
    assert list(MemoryRecord.objects.live().values_list("pk", flat=True)) == [stated.pk]


@pytest.mark.django_db
def test_a_system_of_record_supersedes_a_statement(scope):
    stated = write(scope, "aisle", "e1")
    booked = write(scope, "window", "e2", source_type="system_of_record")

    stated.refresh_from_db()
    assert stated.superseded_by_id == booked.pk and booked.status == "active"


@pytest.mark.django_db
def test_two_disagreeing_org_records_are_stored_as_a_conflict_not_merged(scope):
    first = write(scope, "aisle", "e1", source_type="org_record", namespace="org/policy", field="seat_policy")
    second = write(scope, "window", "e2", source_type="org_record", namespace="org/policy", field="seat_policy")

    first.refresh_from_db()
    assert first.status == second.status == "active"
    conflict = Conflict.objects.get()
    assert set(conflict.records.values_list("pk", flat=True)) == {first.pk, second.pk}
    assert first.text == "Prefers aisle seats" and second.text == "Prefers window seats"


@pytest.mark.django_db
def test_two_org_records_that_differ_only_in_case_spacing_or_character_forms_agree(scope):
    # Full-width letters, a non-breaking space, a line break and doubled spaces: the same value, written twice.
    first = write(scope, "Aisle\u00a0 seat,\n ＮＥＡＲ the  front", "e1", source_type="org_record",
                  namespace="org/policy", field="seat_policy")
    second = write(scope, "aisle seat, near the front ", "e2", source_type="org_record", namespace="org/policy",
                   field="seat_policy")

    first.refresh_from_db()
    assert not Conflict.objects.exists()
    assert (first.status, first.superseded_by_id, second.status) == ("superseded", second.pk, "active")
    # A different value still is a conflict.
    third = write(scope, "window seat", "e3", source_type="org_record", namespace="org/policy", field="seat_policy")
    assert set(Conflict.objects.get().records.values_list("pk", flat=True)) == {second.pk, third.pk}


@pytest.mark.django_db
def test_fields_do_not_interfere(scope):
    seat = write(scope, "aisle", "e1")
    write(scope, "vegetarian", "e2", field="meal")

    seat.refresh_from_db()
    assert seat.status == "active"


@pytest.mark.django_db
def test_a_record_past_its_validity_reads_as_expired_and_is_not_a_head(scope, agent):
    past = timezone.now() - dt.timedelta(days=2)
    old = write(scope, "aisle", "e1", valid_from=past, valid_until=past + dt.timedelta(days=1))
    new = write(scope, "window", "e2")

    old.refresh_from_db()
    assert old.superseded_by_id is None  # an expired record is not superseded, it simply ended
    assert agent.get(f"/api/v1/memories/{old.pk}").json()["status"] == "expired"
    assert [r["memory_id"] for r in agent.get("/api/v1/memories", {"status": "expired"}).json()["results"]] == [old.pk]
    assert new.supersedes_id is None
