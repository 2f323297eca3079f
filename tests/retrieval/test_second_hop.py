"""Retrieval through more than one matching record (memory/retrieval/expansion.py): an answer that says nothing the
question says is found through the record the question does match. Real model, real database, through the API."""

from __future__ import annotations

import pytest

from memory.retrieval import expansion, ranking
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db

MOVE = "My sister Priya moved to Lisbon last spring"
TILE = "Priya sent me a hand-painted tile for my birthday"
OTHERS = ["For my birthday my colleague Mark gave me a cookbook", "My neighbour sent me flowers for my birthday",
          "My dad bought me a watch for my birthday", "Prefers aisle seats on flights",
          "Is allergic to shellfish", "Plays the cello in an amateur orchestra"]
QUESTION = "What birthday present did my sister in Lisbon give me?"


@pytest.mark.parametrize("hop", ["off", "lexical", "semantic", "both"])
def test_probe(agent, remember, monkeypatch, hop):
    monkeypatch.setattr(expansion, "HOP", hop)
    monkeypatch.setattr(ranking, "HOP_WEIGHT", 0.3)
    ids = {text: remember(agent, text) for text in [MOVE, TILE, *OTHERS]}
    names = {v: k for k, v in ids.items()}
    packets = retrieve(agent, QUESTION)["packets"]
    print(hop, [(names[p["memory_id"]][:30], p["score"], p["match"]) for p in packets])
