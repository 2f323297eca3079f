"""The retrieval statement is compiled once per subject and scope shape, not once per caller: every agent key
reading a subject shares it, while a narrower grant gets a statement of its own (and sees only its grant)."""

from __future__ import annotations

import pytest

from memory.retrieval import candidates
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(candidates, "_STATEMENTS", type(candidates._STATEMENTS)())
    return candidates._STATEMENTS


def test_two_keys_reading_one_subject_share_one_statement(agent, make_agent, tenant, remember, fresh_cache):
    remember(agent, "Prefers aisle seats", field="seat")
    second = make_agent(tenant, "usr_owner")  # another agent key, the same subject

    first_ids = [p["memory_id"] for p in retrieve(agent, "Which seat?")["packets"]]
    second_ids = [p["memory_id"] for p in retrieve(second, "Which seat?")["packets"]]

    assert first_ids == second_ids and len(first_ids) == 1
    assert len(fresh_cache) == 1


def test_a_narrower_grant_gets_its_own_statement_and_only_its_records(agent, make_agent, tenant, remember,
                                                                       fresh_cache):
    remember(agent, "Prefers aisle seats", field="seat", namespace=["user", "travel"])
    remember(agent, "Aisle of the supermarket: aisle 7 has the tea", field="tea", namespace=["org", "shops"])
    narrow = make_agent(tenant, "usr_owner", token_namespaces=["user"])

    wide = {p["namespace"][0] for p in retrieve(agent, "aisle")["packets"]}
    restricted = {p["namespace"][0] for p in retrieve(narrow, "aisle")["packets"]}

    assert wide == {"user", "org"} and restricted == {"user"}
    assert len(fresh_cache) == 2
