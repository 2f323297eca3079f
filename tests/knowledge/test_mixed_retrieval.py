"""POST /api/v1/retrieve with include ["memory", "knowledge"]: one fusion, one budget."""

from __future__ import annotations

import pytest

from tests.conftest import memory_body
from tests.knowledge.conftest import doc_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/retrieve"


@pytest.fixture
def seeded(agent, outsider, handbook):
    agent.post("/api/v1/memories", memory_body())
    agent.post("/api/v1/documents", doc_body(
        external_id="seats.md", title="Seat assignment policy",
        text="Aisle seats are assigned first to travellers who stated an aisle seat preference."))
    agent.post("/api/v1/documents", doc_body(
        external_id="refunds.md", text="Refunds for unused seats are processed within 30 days."))


def test_memory_and_knowledge_compete_for_one_budget(agent, seeded):
    response = agent.post(URL, {"query": "aisle seat preference", "include": ["memory", "knowledge"],
                                "budget_tokens": 400, "limit": 10})

    assert response.status_code == 200, response.json()
    body = response.json()
    kinds = [p.get("kind") for p in body["packets"]]
    assert "preference" in kinds and "knowledge" in kinds
    knowledge = next(p for p in body["packets"] if p.get("kind") == "knowledge")
    for field in ("document_id", "external_id", "title", "chunk", "text", "score", "tokens", "source_date"):
        assert field in knowledge, field
    assert knowledge["content_role"] == "data"
    assert knowledge["external_id"] == "seats.md"
    scores = [p["score"] for p in body["packets"]]
    assert scores == sorted(scores, reverse=True)
    assert body["budget"]["used"] == sum(p["tokens"] for p in body["packets"]) <= 400


def test_a_tight_budget_keeps_the_best_items_across_both_sources(agent, seeded):
    wide = agent.post(URL, {"query": "aisle seat preference", "include": ["memory", "knowledge"],
                            "budget_tokens": 400}).json()
    first = wide["packets"][0]

    tight = agent.post(URL, {"query": "aisle seat preference", "include": ["memory", "knowledge"],
                             "budget_tokens": first["tokens"]}).json()

    assert [p.get("memory_id") or p.get("document_id") for p in tight["packets"]] == [
        first.get("memory_id") or first.get("document_id")]
    assert tight["budget"]["used"] <= first["tokens"]


def test_a_request_may_restrict_to_knowledge_only(agent, seeded):
    body = agent.post(URL, {"query": "aisle seat preference", "include": ["knowledge"]}).json()

    assert body["packets"] and {p["kind"] for p in body["packets"]} == {"knowledge"}


def test_an_outsider_gets_no_knowledge_for_the_identical_query(outsider, seeded):
    body = outsider.post(URL, {"query": "aisle seat preference", "include": ["memory", "knowledge"]}).json()

    assert body["packets"] == []


def test_the_access_domains_filter_passes_through_the_api(agent, make_domain, tenant, seeded):
    make_domain(tenant, "travel-desk")
    agent.post("/api/v1/documents", doc_body(access_domain="travel-desk", external_id="desk.md", title="Desk",
                                             text="The travel desk books aisle seats on request."))

    body = agent.post(URL, {"query": "aisle seat", "include": ["knowledge"],
                            "filters": {"access_domains": ["travel-desk"]}}).json()

    assert {p["access_domain"] for p in body["packets"]} == {"travel-desk"}
