"""include: other sources plug in through memory/retrieval/sources.py and share fusion and the budget."""

from __future__ import annotations

import datetime as dt

import pytest

from memory.retrieval import sources
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db


@pytest.fixture
def notes_provider():
    """A small source registered the way threads/procedures/knowledge register theirs."""
    seen = []

    @sources.register_provider("notes_test")
    def notes(scope, query):
        seen.append((scope.subject_id, query.text, query.limit))
        text = "Boarding usually starts 40 minutes early"
        return [sources.SourceItem(source="notes_test", item_id="note_1", text=text,
                                   packet={"kind": "note", "status": "confirmed"}, lexical_rank=1, semantic_rank=1,
                                   semantic_similarity=0.8, source_date=dt.datetime(2026, 5, 1, tzinfo=dt.UTC))]

    yield seen
    sources._providers.pop("notes_test", None)


def test_it_fuses_provider_items_with_memory_under_one_budget(agent, remember, notes_provider):
    remember(agent, "Prefers aisle seats", field="seat_preference", value="aisle")

    body = retrieve(agent, "boarding and seats", include=["memory", "notes_test"], budget_tokens=400)

    note = next(p for p in body["packets"] if p["source"] == "notes_test")
    assert note == {**note, "kind": "note", "status": "confirmed", "text": "Boarding usually starts 40 minutes early",
                    "source_date": "2026-05-01", "content_role": "data"}
    assert note["tokens"] > 0 and 0 < note["score"] <= 1
    assert body["budget"]["used"] == sum(p["tokens"] for p in body["packets"])
    assert notes_provider == [(agent.subject.pk, "boarding and seats", 40)]


def test_it_calls_only_the_sources_included(agent, notes_provider):
    body = retrieve(agent, "boarding")

    assert notes_provider == []
    assert all(p["source"] == "memory" for p in body["packets"])


def test_a_provider_item_counts_against_the_budget(agent, notes_provider):
    body = retrieve(agent, "boarding", include=["notes_test"], budget_tokens=2)

    assert body["packets"] == []
    assert body["dropped"] == {"budget": 1}
