"""Reviewers: rita reviews acme (the agent's tenant), gus reviews globex only."""

from __future__ import annotations

from typing import Any

import pytest

from memory.consolidation import consolidate
from memory.identity.services import user_create
from memory.models import Candidate, Conflict, Tenant
from tests.conftest import memory_body
from tests.consolidation.helpers import submit
from tests.deletion.helpers import run_job

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def rita(tenant: Any) -> Any:
    return user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)


@pytest.fixture
def gus(other_tenant: Any) -> Any:
    return user_create(tenant=other_tenant, username="gus", password="gus-pass-123", reviewer=True)


def in_review(agent: Any, **kwargs: Any) -> Candidate:
    candidate = submit(agent, **kwargs)
    assert consolidate(candidate.pk) == "review"
    candidate.refresh_from_db()
    return candidate


def org_conflict(agent: Any) -> Conflict:
    """Two org records that disagree: precedence cannot decide, a Conflict is stored."""
    for event_id, value in (("evt_org_1", "EU"), ("evt_org_2", "US")):
        response = agent.post("/api/v1/outcomes", {
            "namespace": ["org", "billing"], "kind": "policy", "fact": {"field": "region", "value": value},
            "text": f"Billing region is {value}", "source": {"type": "org_record", "event_id": event_id}})
        assert response.status_code == 201, response.json()
    return Conflict.objects.get(field="region")


@pytest.fixture
def alice(tenant):
    """A person with memories of her own, neither staff nor a reviewer."""
    return user_create(tenant=tenant, username="alice", password="alice-pass-123", subject_external_id="usr_owner")


@pytest.fixture
def known_state(agent, make_agent, tenant, rita, gus):
    """acme: 2 candidates in review, 1 open conflict, deletions (1 completed, 1 pending), 2 retrievals,
    refusals (2 secret_detected, 1 class_not_allowed, 1 insufficient_scope); globex: 1 candidate."""
    in_review(agent, event_id="evt_a")
    in_review(agent, field="meal", value="vegetarian", text="Orders vegetarian meals", event_id="evt_b")
    org_conflict(agent)
    pending = agent.post("/api/v1/memories", memory_body(
        fact={"field": "home_airport", "value": "OPO"}, text="Flies from Porto",
        source={"type": "explicit_user_statement", "event_id": "evt_home"})).json()["memory_id"]
    gone = agent.post("/api/v1/memories", memory_body(fact={"field": "meal", "value": "fish"}, text="Eats fish",
                                                      source={"type": "explicit_user_statement",
                                                              "event_id": "evt_fish"})).json()["memory_id"]
    run_job(agent.delete(f"/api/v1/memories/{gone}").json()["deletion_id"])
    agent.delete(f"/api/v1/memories/{pending}")  # stays pending: no worker runs in this test
    for _ in range(2):
        assert agent.post("/api/v1/retrieve", {"query": "seat"}).status_code == 200
    for n in range(2):
        refused = agent.post("/api/v1/memories", memory_body(text=f"My AWS key is {SECRET}",
                                                             source={"type": "explicit_user_statement",
                                                                     "event_id": f"evt_secret_{n}"}))
        assert refused.json()["code"] == "secret_detected"
    assert agent.post("/api/v1/memories", memory_body(namespace=["nowhere"])).json()["code"] == "class_not_allowed"
    reader = make_agent(tenant, "usr_owner", scopes=["read"])
    assert reader.post("/api/v1/memories", memory_body()).json()["code"] == "insufficient_scope"
    globex = make_agent(Tenant.objects.get(slug="globex"), "usr_g")
    in_review(globex, event_id="evt_g")
