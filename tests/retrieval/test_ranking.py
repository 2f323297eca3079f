"""Fusion and reranking: relevance first; authority, confidence and recency order near-ties."""

from __future__ import annotations

import datetime as dt

import pytest

from memory.retrieval.ranking import Ranked, below_threshold, rrf, score
from tests.retrieval.conftest import retrieve

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def ranked(*, lexical=None, semantic=None, similarity=None, authority="explicit_user_statement", confirmed=True,
           age_days=0):
    item = Ranked(source="memory", item_id="x", text="t", packet={}, authority=authority, confirmed=confirmed,
                  source_date=NOW - dt.timedelta(days=age_days), dedupe_key="k", lexical_rank=lexical,
                  semantic_rank=semantic, similarity=similarity)
    score(item, NOW)
    return item


def test_reciprocal_rank_fusion_rewards_being_found_by_both_legs():
    assert rrf(1, 1) > rrf(1, None) > rrf(2, None) > rrf(None, None) == 0


def test_it_keeps_the_score_in_zero_to_one():
    best = ranked(lexical=1, semantic=1, similarity=1.0, authority="system_of_record")
    worst = ranked(similarity=0.0, authority="summary", confirmed=False, age_days=10_000)

    assert best.score == pytest.approx(1.0)
    assert 0.0 <= worst.score < 0.05


@pytest.mark.parametrize(("stronger", "weaker"), [
    ({"authority": "system_of_record"}, {"authority": "model_inferred"}),
    ({"confirmed": True}, {"confirmed": False}),
    ({"age_days": 1}, {"age_days": 720}),
])
def test_authority_confidence_and_recency_order_equally_relevant_items(stronger, weaker):
    legs = {"lexical": 2, "semantic": 1, "similarity": 0.7}

    assert ranked(**legs, **stronger).score > ranked(**legs, **weaker).score


def test_they_never_lift_an_unrelated_item_above_a_relevant_one():
    relevant = ranked(lexical=1, semantic=1, similarity=0.75, authority="model_inferred", confirmed=False,
                      age_days=700)
    unrelated = ranked(semantic=2, similarity=0.3, authority="system_of_record", age_days=0)

    assert relevant.score > unrelated.score


def test_a_vector_only_item_below_the_similarity_floor_is_below_threshold():
    assert below_threshold(ranked(semantic=1, similarity=0.2))
    assert not below_threshold(ranked(semantic=1, similarity=0.4))
    assert not below_threshold(ranked(lexical=5, similarity=0.1))  # the text matched: not noise


@pytest.mark.django_db
def test_the_higher_authority_of_two_identical_texts_ranks_first(agent, remember):
    official = remember(agent, "Ships to the Porto warehouse", namespace=["project"], field="ship_to_erp",
                        value="Porto", kind="config", source_type="system_of_record", path="/api/v1/outcomes")
    # Written later: newer, so recency and the lexical leg's tie-break favour it; authority must win.
    said = remember(agent, "Ships to the Porto warehouse", namespace=["project"], field="ship_to_said",
                    value="Porto", kind="config")

    packets = retrieve(agent, "Where do we ship to?")["packets"]

    assert [p["memory_id"] for p in packets[:2]] == [official, said]
