"""Reviewers: rita reviews acme (the agent's tenant), gus reviews globex only."""

from __future__ import annotations

from typing import Any

import pytest

from memory.consolidation import consolidate
from memory.identity.services import user_create
from memory.models import Candidate, Conflict
from tests.consolidation.helpers import submit


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
