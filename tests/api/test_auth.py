"""Authentication and scope: agent key + principal token -> the request's scope, or a clear refusal."""

from __future__ import annotations

import time

import pytest
from django.core import signing
from django.utils import timezone
from rest_framework.test import APIClient

from memory.identity.services import principal_token_mint
from memory.models import AgentKey, MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


def test_it_refuses_a_request_without_credentials():
    response = APIClient().get(URL)

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_refuses_an_unknown_key(agent):
    response = APIClient().get(URL, HTTP_AUTHORIZATION="Bearer egk_not-a-key", HTTP_X_ENGRAM_PRINCIPAL=agent.token)

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_key"


def test_it_refuses_a_malformed_authorization_header(agent):
    response = APIClient().get(URL, HTTP_AUTHORIZATION=f"Basic {agent.key}")

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_key"


def test_it_refuses_a_revoked_key(agent):
    AgentKey.objects.update(revoked_at=timezone.now())

    assert agent.get(URL).status_code == 401


def test_it_requires_a_principal_token_for_memory_endpoints(make_agent, tenant):
    keyed = make_agent(tenant, subject=None)

    response = keyed.get(URL)

    assert response.status_code == 401
    assert response.json()["code"] == "principal_required"


def test_it_refuses_a_tampered_token(agent):
    agent.token = agent.token[:-3] + ("abc" if not agent.token.endswith("abc") else "xyz")

    response = agent.get(URL)

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_principal"


def test_it_refuses_an_expired_token(agent, tenant, monkeypatch):
    token, _, _ = principal_token_mint(tenant=tenant, subject_external_id="usr_owner", ttl=1)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 5)
    agent.token = token

    response = agent.get(URL)

    assert response.status_code == 401
    assert response.json()["code"] == "principal_expired"


def test_it_refuses_a_token_signed_for_another_purpose(agent):
    agent.token = "ept_" + signing.dumps({"t": agent.tenant.pk, "s": "usr_owner", "exp": 2**40})

    assert agent.get(URL).json()["code"] == "invalid_principal"


def test_it_refuses_a_token_of_another_tenant_with_403(agent, foreign_agent):
    agent.token = foreign_agent.token

    response = agent.get(URL)

    assert response.status_code == 403
    assert response.json()["code"] == "tenant_mismatch"


def test_it_refuses_a_body_subject_that_disagrees_with_the_token(agent):
    response = agent.post(URL, memory_body(subject_id="usr_outsider"))

    assert response.status_code == 400
    assert response.json()["code"] == "scope_mismatch"
    assert MemoryRecord.objects.count() == 0


def test_it_accepts_a_body_subject_that_matches_the_token(agent):
    assert agent.post(URL, memory_body(subject_id="usr_owner")).status_code == 201


def test_a_tenant_in_the_body_is_not_a_way_to_widen_scope(agent):
    response = agent.post(URL, memory_body(tenant="globex"))

    assert response.status_code == 400
    assert MemoryRecord.objects.count() == 0


def test_token_namespace_grants_narrow_what_the_key_may_touch(make_agent, tenant):
    narrowed = make_agent(tenant, "usr_owner", token_namespaces=["user/travel_preferences"])

    allowed = narrowed.post(URL, memory_body())
    refused = narrowed.post(URL, memory_body(namespace=["user", "profile"], source={"event_id": "e2"}))

    assert allowed.status_code == 201
    assert refused.status_code == 403
    assert refused.json()["code"] == "namespace_forbidden"


def test_key_namespaces_and_token_grants_intersect(make_agent, tenant):
    agent = make_agent(tenant, "usr_owner", namespaces=["org"], token_namespaces=["user"])

    response = agent.post(URL, memory_body())

    assert response.status_code == 403
    assert response.json()["code"] == "namespace_forbidden"


def test_a_read_only_key_cannot_write(make_agent, tenant):
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    response = reader.post(URL, memory_body())

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
