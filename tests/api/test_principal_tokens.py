"""POST /api/v1/principal-tokens: the tenant's trusted backend mints tokens with a mint-scoped key."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.models import AuditEntry, Subject

pytestmark = pytest.mark.django_db

URL = "/api/v1/principal-tokens"


@pytest.fixture
def minter(make_agent, tenant):
    return make_agent(tenant, subject=None, scopes=["read", "write", "mint"])


def test_it_mints_a_token_that_authenticates_as_the_subject(minter):
    response = minter.post(URL, {"subject_id": "usr_new", "ttl": 600})

    assert response.status_code == 201
    body = response.json()
    assert body["subject_id"] == "usr_new"
    minter.token = body["token"]
    assert minter.get("/api/v1/memories").status_code == 200


def test_it_creates_a_user_subject_when_the_tenant_has_none(minter, tenant):
    minter.post(URL, {"subject_id": "usr_fresh"})

    subject = Subject.objects.get(tenant=tenant, external_id="usr_fresh")
    assert subject.kind == "user"


def test_it_carries_namespace_grants(minter):
    minter.token = minter.post(URL, {"subject_id": "usr_new", "namespaces": [["user", "profile"]]}).json()["token"]

    response = minter.post("/api/v1/memories", {
        "namespace": ["user", "travel_preferences"], "kind": "preference",
        "fact": {"field": "seat", "value": "aisle"}})

    assert response.status_code == 403


def test_it_requires_the_mint_scope(make_agent, tenant):
    plain = make_agent(tenant, subject=None)

    response = plain.post(URL, {"subject_id": "usr_new"})

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert not Subject.objects.filter(external_id="usr_new").exists()


def test_it_refuses_without_credentials():
    assert APIClient().post(URL, {"subject_id": "x"}, format="json").status_code == 401


@pytest.mark.parametrize("ttl", [0, 10**9])
def test_it_refuses_an_out_of_range_ttl(minter, ttl):
    response = minter.post(URL, {"subject_id": "usr_new", "ttl": ttl})

    assert response.status_code == 400
    assert response.json()["code"] in {"invalid", "invalid_ttl"}


def test_it_refuses_a_missing_subject(minter):
    response = minter.post(URL, {})

    assert response.status_code == 400
    assert "subject_id" in response.json()["detail"]


def test_it_names_the_subject_for_people_with_a_display_name(minter, tenant):
    response = minter.post(URL, {"subject_id": "usr_named", "display_name": "  Alice   Martin "})

    assert response.status_code == 201 and response.json()["display_name"] == "Alice Martin"
    subject = Subject.objects.get(tenant=tenant, external_id="usr_named")
    assert subject.display_name == "Alice Martin" and subject.name == "Alice Martin"
    entry = AuditEntry.objects.get(action="subject.display_name", object_id=str(subject.pk))
    assert entry.data == {"set": True}  # the name is personal data: the audit row does not copy it


def test_it_keeps_the_display_name_when_none_is_sent_and_clears_it_with_an_empty_one(minter, tenant):
    minter.post(URL, {"subject_id": "usr_named", "display_name": "Alice Martin"})
    assert minter.post(URL, {"subject_id": "usr_named"}).json()["display_name"] == "Alice Martin"

    assert minter.post(URL, {"subject_id": "usr_named", "display_name": ""}).json()["display_name"] == ""
    assert Subject.objects.get(tenant=tenant, external_id="usr_named").name == "usr_named"


def test_it_refuses_a_display_name_with_control_characters_or_too_long(minter, tenant):
    bad = minter.post(URL, {"subject_id": "usr_named", "display_name": "Alice\x07"})
    long = minter.post(URL, {"subject_id": "usr_named", "display_name": "A" * 201})

    assert bad.status_code == 400 and bad.json()["code"] == "invalid_display_name"
    assert long.status_code == 400
    assert not Subject.objects.filter(tenant=tenant, external_id="usr_named").exclude(display_name="").exists()


def test_a_subject_without_a_display_name_is_called_by_its_linked_persons_name(tenant):
    from memory.identity.services import user_create

    person = user_create(tenant=tenant, username="alice", password="pw", subject_external_id="usr_alice")
    subject = Subject.objects.get(external_id="usr_alice")
    assert subject.name == "alice"
    person.first_name, person.last_name = "Alice", "Martin"
    person.save()
    assert Subject.objects.get(external_id="usr_alice").name == "Alice Martin"
