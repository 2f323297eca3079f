"""A question that names a person prefers what that person said (memory/retrieval/names.py). In a long conversation
between two people each name is in half the records, so BM25 counts it as a common word; the name bonus orders the
records about the named person before the other person's records on the same topic, without lifting an unrelated
record over a clearly relevant one. Real model, real database, through the API."""

from __future__ import annotations

import pytest

from memory.retrieval.names import named
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db

# Enough turns that the memory is larger than the candidate pool (BM25's IDF then counts each name as common).
EVERYDAY = ["baked sourdough bread", "repainted the kitchen", "watched a documentary about whales",
            "went to a jazz concert", "planted tomatoes in the garden", "visited the science museum",
            "fixed a flat tyre", "started learning Spanish", "cooked a curry for friends", "cleaned out the attic",
            "walked the dog along the river", "read a novel about pirates", "bought new running shoes",
            "went to the dentist", "played chess online", "made a photo album", "visited grandparents",
            "tried a new pizza place", "knitted a scarf", "built a birdhouse", "went to a farmers market",
            "watched a football match", "wrote a long letter"]
TOM_GIFT = "Tom: My sister gave me a watercolour set for my birthday, so I've been painting birds"
ANNA_GIFT = "Anna: For my birthday my brother surprised me with paints and brushes, I can't wait to start"
TOM_VIOLIN = "Tom: I'm learning the violin with a teacher from the orchestra, practising every evening"
ANNA_CELLO = "Anna: I finally signed up for cello lessons, the first one is on Monday"
TOM_CLIMBS = "Tom: I go climbing at the old quarry every Saturday, it clears my head after a long week"


def test_a_question_naming_a_person_puts_her_records_before_the_other_persons_on_the_same_topic(agent, remember):
    turns = [f"{who}: I {what} yesterday and honestly it was a lot of fun, you should try it"
             for what in EVERYDAY for who in ("Tom", "Anna")]
    ids = {text: remember(agent, text) for text in [*turns, TOM_GIFT, ANNA_GIFT, TOM_VIOLIN, ANNA_CELLO, TOM_CLIMBS]}

    def top(question, n=3):
        return [p["memory_id"] for p in retrieve(agent, question)["packets"][:n]]

    # Without the bonus Tom's gift came second, and his violin tied with Anna's cello (0.4307 against 0.4308).
    birthday = top("What did Anna get for her birthday?")
    assert birthday[0] == ids[ANNA_GIFT]
    assert ids[TOM_GIFT] not in birthday
    # The retrieval log says which candidates the bonus lifted.
    body = retrieve(agent, "What did Anna get for her birthday?")
    logged = {c["memory_id"]: c["names"] for c in agent.get(f"/api/v1/retrievals/{body['retrieval_id']}").json()
              ["candidates"]}
    assert logged[ids[ANNA_GIFT]] is True and logged[ids[TOM_GIFT]] is False
    instrument = top("Which instrument is Anna learning?")
    assert ids[ANNA_CELLO] in instrument[:2]
    assert ids[TOM_VIOLIN] not in instrument
    # The bonus orders near-ties only: Tom's climbing, the one record about climbing, still beats every unrelated
    # record of Anna's.
    assert top("Where does Anna go climbing?", 1) == [ids[TOM_CLIMBS]]


def test_only_capitalised_words_inside_a_sentence_count_as_names():
    assert named("What did Anna paint for Tom's birthday?") == {"anna", "tom"}
    # A sentence's first word, words in capitals (acronyms) and lower-case words are not names.
    assert named("Caroline went where? Would LGBTQ groups support her?") == set()
    assert named("when did she move to Sweden") == {"sweden"}  # places too: a proper noun, whatever it names
