"""A retrieve's query is embedded while its request is authenticated, but only for a key this process already
trusts (api/prefetch.py): a guessed, revoked, throttled or read-less key, or a query that looks like a secret, costs
the server no model work before it is refused."""

from __future__ import annotations

import itertools

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from api.models import ThrottleCounter
from api.throttling import AgentKeyThrottle, AnonymousThrottle
from memory.embedder import get_embedder
from memory.models import AgentKey
from tests.conftest import wait_for
from tests.retrieval.conftest import RETRIEVE

pytestmark = pytest.mark.django_db

_numbers = itertools.count()


def fresh_query() -> str:
    """A question no earlier test asked in this process (the embedder's query cache outlives a test)."""
    return f"which seats does the traveller prefer, case {next(_numbers)} of the prefetch tests?"


def embedded(text: str) -> bool:
    return get_embedder().knows_query(text)


@pytest.fixture
def trusted(remember):
    """trusted(agent) -> memory_id: one successful call, writing (and embedding) "Prefers aisle seats on flights";
    from then on this process trusts the agent's key."""
    return lambda agent: remember(agent, "Prefers aisle seats on flights")


def test_a_trusted_keys_query_is_on_its_way_before_the_view_reads_the_body(agent, trusted):
    trusted(agent)
    query = fresh_query()

    # Refused by the view's validation: the pipeline, which embeds the query itself, never runs.
    response = agent.post(RETRIEVE, {"query": query, "limit": 0})

    assert response.status_code == 400
    assert wait_for(lambda: embedded(query))


def test_a_prefetched_query_answers_as_any_other(agent, trusted):
    memory_id = trusted(agent)

    body = agent.post(RETRIEVE, {"query": f"  where should I sit on the plane, trip {next(_numbers)}?  "}).json()

    assert body["packets"][0]["memory_id"] == memory_id


def test_a_guessed_key_costs_no_model_work(agent, trusted):
    trusted(agent)
    query = fresh_query()

    response = APIClient().post(RETRIEVE, {"query": query}, format="json", HTTP_AUTHORIZATION="Bearer egk_guessed",
                                HTTP_X_ENGRAM_PRINCIPAL=agent.token)

    assert response.status_code == 401
    assert not embedded(query)


def test_a_revoked_key_is_forgotten_at_its_first_refusal(agent, trusted):
    trusted(agent)
    AgentKey.objects.update(revoked_at=timezone.now())
    assert agent.post(RETRIEVE, {"query": fresh_query()}).status_code == 401
    query = fresh_query()

    response = agent.post(RETRIEVE, {"query": query})

    assert response.status_code == 401
    assert not embedded(query)


def test_a_query_that_looks_like_a_secret_is_never_embedded(agent, trusted):
    trusted(agent)
    query = f"is AKIAIOSFODNN7EXAMPLE still the key of trip {next(_numbers)}?"

    response = agent.post(RETRIEVE, {"query": query})

    assert response.status_code == 422 and response.json()["code"] == "secret_detected"
    assert not embedded(query)


def test_a_key_that_may_not_read_gets_no_early_embedding(make_agent, tenant, trusted):
    writer = make_agent(tenant, "usr_owner", scopes=["write"])
    trusted(writer)
    query = fresh_query()

    response = writer.post(RETRIEVE, {"query": query})

    assert response.status_code == 403
    assert not embedded(query)


def test_a_throttled_key_gets_no_early_embedding_until_it_may_be_served(agent, trusted, monkeypatch):
    rates = {"agent_key": "2/min", "anonymous": "100/min"}
    monkeypatch.setattr(AgentKeyThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", rates)
    ThrottleCounter.objects.all().delete()
    trusted(agent)
    assert agent.post(RETRIEVE, {"query": fresh_query()}).status_code == 200
    assert agent.post(RETRIEVE, {"query": fresh_query()}).status_code == 429
    query = fresh_query()

    response = agent.post(RETRIEVE, {"query": query})

    assert response.status_code == 429
    assert not embedded(query)
