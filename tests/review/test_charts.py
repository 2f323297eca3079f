"""Inline SVG charts (review/charts.py): drawn from the numbers, escaped, named for screen readers."""

from __future__ import annotations

from review.charts import Chart, Series, nice_max


def chart(**kwargs) -> Chart:
    base = {"id": "c", "title": "Retrievals", "unit": "retrievals", "labels": ["00:00", "01:00", "02:00"],
            "series": [Series("a", [0, 3, 1]), Series("b", [0, 2, 0], "#b3261e")]}
    return Chart(**{**base, **kwargs})


def test_it_draws_one_rect_per_non_zero_value_stacked():
    svg = chart().svg

    assert svg.count("<rect") == 3
    assert '<title id="c-title">Retrievals</title>' in svg and 'role="img"' in svg
    assert "6 retrievals in all; the most, 5, at 01:00." in svg
    assert "<script" not in svg and "style=" not in svg


def test_it_says_when_there_is_nothing_to_draw():
    svg = chart(series=[Series("a", [0, 0, 0])]).svg

    assert "<rect" not in svg and "No retrievals in this period." in svg


def test_it_escapes_labels_and_names():
    svg = chart(labels=["<b>x</b>", "1", "2"], title='"><script>', horizontal=True,
                series=[Series("<i>", [1, 2, 3])]).svg

    assert "<b>" not in svg and "<script>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg


def test_the_table_has_the_drawn_series_and_the_table_only_ones():
    c = chart(table_series=[Series("Average (s)", [0, 1.25, 0])])

    assert c.rows[1] == ("01:00", ["3", "2", "1.2"])
    assert [s.name for s in c.table_columns] == ["a", "b", "Average (s)"]


def test_the_axis_ends_at_a_round_number():
    assert [nice_max(v) for v in (0, 1, 3, 7, 10, 11, 420)] == [1, 1, 5, 10, 10, 20, 500]
