"""POST /api/v1/candidates: model inferences are accepted as pending candidates, never as facts."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.models import Candidate, MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/candidates"


def inferred(**overrides):
    body = {"namespace": ["user", "inferred"], "fact": {"field": "hotel_style", "value": "boutique"},
            "text": "Seems to prefer boutique hotels",
            "source": {"type": "model_inferred", "event_id": "evt_talk_1", "text": "I loved that tiny hotel in Porto."}}
    return memory_body(**{**body, **overrides})


def test_it_accepts_a_candidate_as_pending_with_202(agent):
    response = agent.post(URL, inferred(confidence=0.7))

    assert response.status_code == 202
    body = response.json()
    assert body["candidate_id"].startswith("cand_")
    assert body["status"] == "pending"
    assert body["confidence"] == "candidate"
    candidate = Candidate.objects.get(pk=body["candidate_id"])
    assert candidate.evidence[0]["text"] == "I loved that tiny hotel in Porto."
    assert candidate.model_confidence == 0.7


def test_a_candidate_is_never_a_fact(agent):
    agent.post(URL, inferred())

    assert MemoryRecord.objects.count() == 0
    assert agent.get("/api/v1/memories").json()["results"] == []


def test_it_is_idempotent_by_event_id(agent):
    first, second = agent.post(URL, inferred()), agent.post(URL, inferred())

    assert (first.status_code, second.status_code) == (202, 200)
    assert Candidate.objects.count() == 1


def test_a_key_with_only_the_propose_scope_may_submit_candidates_but_not_facts(make_agent, tenant):
    proposer = make_agent(tenant, "usr_owner", scopes=["read", "propose"])

    assert proposer.post(URL, inferred()).status_code == 202
    assert proposer.post("/api/v1/memories", memory_body()).status_code == 403


def test_a_read_only_key_may_not_submit(make_agent, tenant):
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    response = reader.post(URL, inferred())

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_it_refuses_a_claimed_higher_authority(agent):
    response = agent.post(URL, inferred(source={"type": "explicit_user_statement", "event_id": "x"}))

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_source_type"


def test_it_needs_credentials():
    assert APIClient().post(URL, {}, format="json").status_code == 401
