"""include: ["procedures"]: current approved versions in scope, as packets with status and version."""

from __future__ import annotations

import pytest

from memory.identity.access import reviewer_of
from memory.retrieval.sources import RetrievalQuery, provider
from procedures.services import procedure_publish, proposal_approve
from tests.procedures.conftest import edited, propose

pytestmark = pytest.mark.django_db


def _search(agent, text: str):
    fn = provider("procedures")
    assert fn is not None  # registered from procedures/apps.py ready()
    return fn(agent.principal_scope, RetrievalQuery(text=text, vector=[], limit=10))


@pytest.fixture
def scoped(agent, outsider, foreign_agent):
    """Attach each agent's verified Scope, as authentication would build it."""
    from rest_framework.test import APIRequestFactory

    from api.authentication import AgentKeyAuthentication

    for a in (agent, outsider, foreign_agent):
        request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {a.key}", HTTP_X_ENGRAM_PRINCIPAL=a.token)
        a.principal_scope = AgentKeyAuthentication().authenticate(request)[0].scope
    return agent, outsider, foreign_agent


def test_it_returns_the_current_version_ranked_by_full_text(scoped, tenant, reviewer, procedure):
    agent, _, _ = scoped
    procedure_publish(tenant=tenant, name="onboarding", body="Welcome new customers warmly.",
                      reviewer=reviewer_of(reviewer))

    items = _search(agent, "how do I refund an order")

    assert [i.packet["name"] for i in items] == ["refunds"]
    item = items[0]
    assert item.packet == {**item.packet, "kind": "procedure", "name": "refunds", "version": 1,
                           "status": "approved", "approved_by": "rita"}
    assert item.lexical_rank == 1 and item.authority == "org_record" and "Refund procedure" in item.text


def test_it_never_serves_a_pending_proposal_or_an_old_version(scoped, tenant, reviewer, procedure):
    agent, _, _ = scoped
    propose(agent, edited("5. Zanzibar voucher for everyone."))
    assert _search(agent, "zanzibar") == []

    second = propose(agent, edited("5. Mention the loyalty programme.")).json()["proposal_id"]
    proposal_approve(tenant_id=tenant.pk, proposal_id=second, reviewer=reviewer_of(reviewer))

    items = _search(agent, "refund loyalty")
    assert [(i.packet["name"], i.packet["version"]) for i in items] == [("refunds", 2)]


def test_it_respects_tenant_and_project_membership(scoped, tenant, reviewer, procedure):
    agent, outsider, foreign = scoped
    procedure_publish(tenant=tenant, name="release", body="Release checklist: refund nothing.",
                      reviewer=reviewer_of(reviewer), scope="project", members=["usr_owner"])

    assert {i.packet["name"] for i in _search(agent, "refund")} == {"refunds", "release"}
    assert {i.packet["name"] for i in _search(outsider, "refund")} == {"refunds"}
    assert _search(foreign, "refund") == []


def test_the_retrieve_api_serves_procedure_packets(agent, procedure):
    response = agent.post("/api/v1/retrieve", {"query": "refund an order", "include": ["procedures"],
                                               "budget_tokens": 400})

    assert response.status_code == 200, response.json()
    packets = response.json()["packets"]
    assert [(p["kind"], p["name"], p["version"], p["status"]) for p in packets] == [
        ("procedure", "refunds", 1, "approved")]
