"""POST /api/v1/principal-tokens: the tenant's trusted backend mints tokens with a mint-scoped key."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.models import Subject

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
