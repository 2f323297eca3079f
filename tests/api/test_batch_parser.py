"""The batch's quick check of plain statements says exactly what the single write's serializer says.

``plain_statement`` validates the common item shape without DRF; every item it does not accept goes to
the serializer. So for each item either the two give the same record input, or the quick check
declines and the serializer answers (and words the error) as it always did.
"""

from __future__ import annotations

import pytest
from django.conf import settings

from api.record_input import BatchItemParser, plain_statement, to_record_input
from memory.models import SourceType

BASE = {"namespace": ["user", "travel_preferences"], "kind": "preference",
        "fact": {"field": "seat_preference", "value": "aisle"}, "text": "Prefers aisle seats",
        "source": {"type": "explicit_user_statement", "event_id": "evt_1"}}


def variant(**changes):
    item = {**BASE, **changes}
    return {k: v for k, v in item.items() if v is not None}


def with_source(**changes):
    source = {**BASE["source"], **changes}
    return variant(source={k: v for k, v in source.items() if v is not None})


PLAIN = [
    BASE,
    variant(text=None),
    variant(type="episodic"),
    variant(type="semantic"),
    variant(text="  Prefers aisle seats \n"),
    variant(text="x" * settings.ENGRAM_MAX_TEXT_CHARS),
    variant(namespace=[f"n{i}" for i in range(8)]),
    variant(kind="a" * 64),
    variant(fact={"field": "f.1-x_y", "value": {"nested": [1, 2.5, True, None, "ü"]}}),
    variant(fact={"field": "f", "value": 0}),
    variant(fact={"field": "f", "value": False}),
    variant(fact={"field": "f", "value": ""}),
    variant(fact={"field": "f", "value": []}),
    variant(source={}),
    with_source(type=None),
    with_source(event_id=" evt_padded "),
    with_source(event_id="e" * 128),
    with_source(text="  I always take the aisle seat.  "),
    with_source(type="model_inferred"),  # a statement the gate refuses later, as the single write does
    with_source(occurred_at="2026-01-01T00:00:00Z"),  # a conversation turn's time
    with_source(occurred_at="2026-01-01T09:30:00+02:00"),
    with_source(occurred_at="2026-01-01T09:30:00.123456"),  # no zone: the server's, as the serializer reads it
    with_source(occurred_at="2026-01-01"),
]

NOT_PLAIN = [
    variant(subject_id="usr_rita"),
    variant(valid_from="2026-01-01T00:00:00Z"),
    variant(unknown=1),
    variant(namespace="user/travel_preferences"),
    variant(namespace=[]),
    variant(namespace=[f"n{i}" for i in range(9)]),
    variant(namespace=["User"]),
    variant(namespace=[1]),
    variant(kind="Preference"),
    variant(kind="a" * 65),
    variant(kind=5),
    variant(kind=""),
    variant(kind=" preference"),
    variant(type="procedural"),
    variant(type=["semantic"]),
    variant(fact={"field": "f"}),
    variant(fact={"field": "f", "value": None}),
    variant(fact={"field": "f", "value": "x", "extra": 1}),
    variant(fact={"field": "F", "value": "x"}),
    variant(fact={"field": "f", "value": "x" * 8001}),
    variant(fact=["f", "x"]),
    variant(text=""),
    variant(text="   "),
    variant(text="x" * (settings.ENGRAM_MAX_TEXT_CHARS + 1)),
    variant(text=7),
    variant(source="evt_1"),
    with_source(occurred_at="yesterday"),
    with_source(occurred_at="2026-13-01T00:00:00Z"),
    with_source(occurred_at=""),
    with_source(occurred_at=1767225600),
    variant(source={**BASE["source"], "occurred_at": None}),
    with_source(type="verified_outcome"),
    with_source(type="system_of_record"),
    with_source(type="t" * 33),
    with_source(event_id="e" * 129),
    with_source(event_id=""),
    with_source(event_id=12),
    with_source(other="x"),
    variant(reference={"system": "booking", "id": "BK-77"}),
    [],
    "item",
]


@pytest.mark.parametrize("item", PLAIN)
def test_it_checks_a_plain_statement_as_the_serializer_does(item):
    quick = plain_statement(item)

    assert quick is not None
    ours = to_record_input(quick, default_source=SourceType.EXPLICIT_USER_STATEMENT)
    theirs = BatchItemParser(scope=None).by_serializer(item)
    if "event_id" not in item.get("source", {}):  # generated per item when left out
        ours, theirs = ours.canonical(), theirs.canonical()  # type: ignore[union-attr]
    assert ours == theirs


@pytest.mark.parametrize("item", NOT_PLAIN)
def test_it_leaves_every_other_item_to_the_serializer(item):
    assert plain_statement(item) is None
