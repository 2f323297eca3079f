"""Fusion and reranking: relevance from both legs' absolute scores first; authority, confidence and recency order
near-ties; a strong paraphrase is never beaten by a record that shares only a common word with the query."""

from __future__ import annotations

import datetime as dt
import statistics

import pytest

from memory.retrieval.ranking import Ranked, below_threshold, classify, lexical_share, rrf, score
from tests.retrieval.conftest import retrieve

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def ranked(*, lexical=None, semantic=None, similarity=None, share=None, authority="explicit_user_statement",
           confirmed=True, age_days=0):
    item = Ranked(source="memory", item_id="x", text="t", packet={}, authority=authority, confirmed=confirmed,
                  source_date=NOW - dt.timedelta(days=age_days), dedupe_key="k", lexical_rank=lexical,
                  semantic_rank=semantic, similarity=similarity,
                  lexical=share if share is not None else (0.5 if lexical else None))
    score(item, NOW)
    return item


def test_a_provider_without_a_lexical_score_gets_a_share_that_decays_with_its_lexical_rank():
    provider = Ranked(source="notes", item_id="n", text="t", packet={}, authority="summary", confirmed=True,
                      source_date=None, dedupe_key="k")
    shares = []
    for rank in (1, 2, 10, None):
        provider.lexical_rank = rank
        shares.append(lexical_share(provider))
    assert shares[0] > shares[1] > shares[2] > shares[3] == 0
    assert rrf(1) > rrf(2)


def test_it_keeps_the_score_in_zero_to_one():
    best = ranked(lexical=1, semantic=1, similarity=1.0, share=1.0, authority="system_of_record")
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
    relevant = ranked(lexical=1, semantic=1, similarity=0.75, share=0.5, authority="model_inferred", confirmed=False,
                      age_days=700)
    unrelated = ranked(semantic=2, similarity=0.3, authority="system_of_record", age_days=0)

    assert relevant.score > unrelated.score


def test_the_line_is_relative_to_what_the_subject_holds_and_the_best_always_clears_it():
    low = [ranked(semantic=n, similarity=s) for n, s in enumerate((0.2, 0.18, 0.05, 0.04, 0.03), start=1)]
    classify(low)

    assert [i.match for i in low] == ["weak", "weak", None, None, None]
    assert below_threshold(low[2]) and not below_threshold(low[0])


def test_a_meaning_that_stands_out_is_served_when_a_shared_word_lifts_the_best_relevance():
    # One record shares a question word (a weak match: its meaning is not close); the answer shares none.
    shared_word = ranked(lexical=1, semantic=2, similarity=0.25, share=0.9)
    answer = ranked(semantic=1, similarity=0.35)
    rest = [ranked(semantic=n, similarity=0.1) for n in range(3, 8)]
    items = [shared_word, answer, *rest]
    classify(items)

    relevances = [i.relevance for i in items]
    median = statistics.median(relevances)
    assert answer.relevance < median + 0.5 * (max(relevances) - median)  # below the line drawn over relevance
    assert [i.match for i in items] == ["weak", "weak", None, None, None, None, None]


def test_a_record_sharing_a_question_word_is_served_however_low_its_similarity():
    items = [ranked(semantic=1, similarity=0.6), ranked(semantic=2, similarity=0.5),
             ranked(lexical=1, similarity=0.02, share=0.1), ranked(semantic=3, similarity=0.01)]
    classify(items)

    assert [i.match for i in items] == ["strong", "strong", "weak", None]


def test_strong_needs_the_legs_to_agree_or_a_close_meaning():
    items = [ranked(lexical=1, similarity=0.45, share=0.6), ranked(semantic=1, similarity=0.55),
             ranked(lexical=2, similarity=0.1, share=0.9), ranked(semantic=2, similarity=0.45)]
    classify(items)

    assert [i.match == "strong" for i in items] == [True, True, False, False]


@pytest.mark.django_db
def test_the_higher_authority_of_two_identical_texts_ranks_first(agent, remember):
    official = remember(agent, "Ships to the Porto warehouse", namespace=["project"], field="ship_to_erp",
                        value="Porto", kind="config", source_type="system_of_record", path="/api/v1/outcomes")
    # Written later: newer, so recency and the lexical leg's tie-break favour it; authority must win.
    said = remember(agent, "Ships to the Porto warehouse", namespace=["project"], field="ship_to_said",
                    value="Porto", kind="config")

    packets = retrieve(agent, "Where do we ship to?")["packets"]

    assert [p["memory_id"] for p in packets[:2]] == [official, said]


def test_one_shared_common_word_does_not_outweigh_a_strong_paraphrase():
    # The query shares one low-IDF word with the gym record; the seat record paraphrases it (cosine .53 vs .34).
    paraphrase = ranked(semantic=1, similarity=0.53)
    common_word = ranked(lexical=1, semantic=2, similarity=0.34, share=0.05)

    assert paraphrase.score > common_word.score


@pytest.mark.django_db
@pytest.mark.parametrize(("query", "match", "other"), [
    ("I like sitting by the corridor on planes", "Prefers aisle seats on flights", "Likes hotels with a gym"),
    ("What do I like to eat when I fly?", "Orders vegetarian meals on long-haul flights",
     "Likes the colour blue"),
    ("Where do I keep my car?", "Parks the Volvo in the garage under the office", "Keeps a diary every evening"),
    ("Which doctor did I see about my back?", "Saw Dr Almeida, a physiotherapist, for lower back pain",
     "Sees the dentist every six months"),
])
def test_a_strong_semantic_match_is_never_beaten_by_a_record_sharing_only_a_common_word(agent, remember, query,
                                                                                      match, other):
    wanted = remember(agent, match)
    remember(agent, other)

    packets = retrieve(agent, query)["packets"]

    assert packets[0]["memory_id"] == wanted


@pytest.mark.django_db
def test_the_word_shared_by_every_record_does_not_decide_the_ranking(agent, remember):
    # A speaker's name in every turn: with IDF it carries (almost) nothing; the rare word decides.
    for n, text in enumerate(["Ana: my sister moved to Porto last spring", "Ana: the weather was lovely today",
                              "Ana: I finished reading a novel about whales", "Ana: work has been busy this week",
                              "Ana: we adopted a kitten named Miso"]):
        remember(agent, text, field=f"turn_{n}", kind="conversation_turn")

    packets = retrieve(agent, "What is the name of Ana's kitten?")["packets"]

    assert packets[0]["fact"] == "Ana: we adopted a kitten named Miso"
