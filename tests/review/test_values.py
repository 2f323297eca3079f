"""A memory's value as people read it (review/values.py, through the template filters every page uses)."""

from __future__ import annotations

import re
from html import unescape

from django.template import Context, Template

from review.values import ITEMS, SHORT, label, value_text


def shown(value: object) -> str:
    return Template("{% load engram_ui %}{{ v|show_value }}").render(Context({"v": value}))


def visible(html: str) -> str:
    """The text of the markup, roughly as a browser shows it (tags become spaces)."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_it_shows_a_scalar_as_itself():
    assert visible(shown("aisle")) == "aisle"
    assert visible(shown(42)) == "42"
    assert visible(shown(3.5)) == "3.5"
    assert visible(shown(0.1 + 0.2)) == "0.3"
    assert visible(shown(True)) == "Yes" and visible(shown(False)) == "No"
    assert 'class="v-number"' in shown(7) and 'class="v-bool"' in shown(True)


def test_it_says_empty_for_empty_values():
    assert visible(shown(None)) == "(empty)"
    assert visible(shown("   ")) == "(empty)"
    assert visible(shown({})) == "(empty)"
    assert visible(shown([])) == "(none)"


def test_it_shows_an_object_as_labelled_fields():
    html = shown({"route": "MUC-LIS", "order_id": "ORD-2026-0042"})

    assert '<dl class="v-object">' in html
    assert "<dt>Route</dt><dd><span class=\"v-text\">MUC-LIS</span></dd>" in html
    assert "<dt>Order id</dt>" in html
    assert visible(html) == "Route MUC-LIS Order id ORD-2026-0042"


def test_it_shows_nested_objects_and_lists_without_python_punctuation():
    value = {"legs": [{"from": "MUC", "to": "LIS", "seats": [12, 13]}, {"from": "LIS", "to": "MUC"}],
             "paid": True, "refund": None, "tags": [], "meta": {"seenBy": {"agentId": "a1"}}}

    html = shown(value)
    text = visible(html)

    assert html.count('<ul class="v-list">') == 2  # legs, and the seats of the first leg
    assert html.count('<dl class="v-object">') == 5  # the value, two legs, meta, seen by
    for punctuation in ("{'", "'}", '": "', "[", "]", "{", "}", "None", "True"):
        assert punctuation not in text, punctuation
    assert "From MUC To LIS Seats 12 13" in text and "Paid Yes" in text and "Refund (empty)" in text
    assert "Tags (none)" in text and "Seen by Agent id a1" in text


def test_it_escapes_hostile_strings_in_values_and_labels():
    hostile = '<script>alert("x")</script>'
    html = shown({hostile: hostile, "list": [hostile], "long": hostile * 20})

    assert "<script>" not in html
    in_start = (hostile * 20)[:SHORT].count("<script>")
    assert html.count("&lt;script&gt;") == 1 + 1 + 1 + 20 + in_start  # label, value, item, long text, its start
    assert visible(shown(hostile)) == hostile  # shown as the text it is


def test_it_shortens_a_long_string_with_the_full_value_one_click_away():
    text = "word " * 100
    html = shown(text)

    assert html.startswith('<details class="v-long"><summary>')
    summary = html.split("<summary>")[1].split("</summary>")[0]
    assert len(visible(summary)) < SHORT + 40 and f"Show all ({len(text)} characters)" in summary
    assert text.strip() in visible(html.split("</summary>")[1])
    assert "<details" not in shown("short text")


def test_it_puts_the_tail_of_a_long_list_behind_show_more():
    html = shown(list(range(ITEMS + 3)))

    first, rest = html.split('<details class="v-rest">')
    assert first.count("<li>") == ITEMS
    assert "Show 3 more items" in rest and rest.count("<li>") == 3


def test_it_shows_very_deep_values_as_one_line():
    deep: object = "bottom"
    for n in range(8):
        deep = {f"level_{n}": deep}

    text = visible(shown(deep))

    assert "bottom" in text and "{" not in text and "Level 0" in text


def test_it_labels_keys_for_people():
    assert label("order_id") == "Order id"
    assert label("orderId") == "Order id"
    assert label("seat-preference") == "Seat preference"
    assert label("home_airport_IATA") == "Home airport IATA"
    assert label("") == ""


def test_it_gives_one_line_of_text_for_attributes():
    assert value_text({"route": "MUC-LIS", "order_id": "ORD-1"}) == "Route MUC-LIS, Order id ORD-1"
    assert value_text(["a", {"b": 1}]) == "a, (B 1)"
    assert value_text(None) == "(empty)" and value_text([]) == "(none)" and value_text(False) == "No"
    rendered = Template("{% load engram_ui %}<b title=\"{{ v|value_text }}\">").render(Context({"v": {"x": '"><i>'}}))
    assert rendered == '<b title="X &quot;&gt;&lt;i&gt;">'
