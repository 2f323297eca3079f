"""Small charts drawn on the server as inline SVG: no script, nothing loaded from anywhere, so a page that
shows them keeps its Content-Security-Policy. Colours are SVG attributes (not ``style``), and every chart
names itself (``role="img"`` with a title and a description); its numbers are in a table beside it
(the template's ``<details>``), which is what a screen reader or a copy-paste uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT = 480, 170
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 10, 22  # margins of the plot area, in SVG units
PALETTE = ("#2455c3", "#b3261e", "#a15c00", "#1e7a3c", "#6b3fa0", "#5b6673")
AXIS, GRID, INK = "#5b6673", "#dde2e8", "#1d232b"


@dataclass
class Series:
    name: str
    values: list[float]
    color: str = PALETTE[0]


@dataclass
class Chart:
    """One chart: x labels (hours, or categories for ``horizontal``) and one or more series (stacked)."""

    id: str
    title: str
    unit: str  # what a value counts: "retrievals", "seconds", ...
    labels: list[str]
    series: list[Series]
    href: str = ""  # the page that explains the figure
    link_text: str = ""
    horizontal: bool = False
    every: int = 6  # label every n-th column
    notes: list[str] = field(default_factory=list)
    table_series: list[Series] = field(default_factory=list)  # more columns for the table, not drawn

    @property
    def totals(self) -> list[float]:
        return [sum(s.values[i] for s in self.series) for i in range(len(self.labels))]

    @property
    def total(self) -> float:
        return sum(self.totals)

    @property
    def rows(self) -> list[tuple[str, list[str]]]:
        """The table behind the chart: one row per label, one cell per series (drawn, then table-only)."""
        return [(label, [number(s.values[i]) for s in self.table_columns]) for i, label in enumerate(self.labels)]

    @property
    def table_columns(self) -> list[Series]:
        return [*self.series, *self.table_series]

    @property
    def svg(self) -> SafeString:
        return bars(self) if self.horizontal else columns(self)


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _c(value: float) -> str:
    """A coordinate, to a tenth of a unit."""
    return f"{value:.1f}"


def nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 × 10^k at or above ``value`` (at least 1): the top of the axis."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power  # pragma: no cover - the loop always returns


def _frame(chart: Chart, body: SafeString, description: str) -> SafeString:
    return format_html(
        '<svg class="chart" id="{}-svg" role="img" aria-labelledby="{}-title {}-desc" viewBox="0 0 {} {}" '
        'width="100%" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
        '<title id="{}-title">{}</title><desc id="{}-desc">{}</desc>{}</svg>',
        chart.id, chart.id, chart.id, WIDTH, HEIGHT, chart.id, chart.title, chart.id, description, body)


def _describe(chart: Chart) -> str:
    if not chart.total:
        return f"No {chart.unit} in this period."
    totals = chart.totals
    peak = max(range(len(totals)), key=lambda i: totals[i])
    if chart.horizontal:
        return f"{number(chart.total)} {chart.unit} in all; the most in {chart.labels[peak]}: {number(totals[peak])}."
    return f"{number(chart.total)} {chart.unit} in all; the most, {number(totals[peak])}, at {chart.labels[peak]}."


def columns(chart: Chart) -> SafeString:
    """Stacked columns over time, an axis with 0 and its top, every ``every``-th label under its column."""
    n = max(len(chart.labels), 1)
    top = nice_max(max(chart.totals, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / n
    parts: list[SafeString] = [
        format_html('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}"/>', LEFT, TOP, WIDTH - RIGHT, TOP, GRID),
        format_html('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}"/>', LEFT, TOP + plot_h, WIDTH - RIGHT,
                    TOP + plot_h, AXIS),
        format_html('<text x="{}" y="{}" text-anchor="end" font-size="11" fill="{}">{}</text>', LEFT - 4, TOP + 4,
                    AXIS, number(top)),
        format_html('<text x="{}" y="{}" text-anchor="end" font-size="11" fill="{}">0</text>', LEFT - 4,
                    TOP + plot_h + 4, AXIS),
    ]
    for i, label in enumerate(chart.labels):
        x = LEFT + i * slot + slot * 0.15
        base: float = TOP + plot_h
        for s in chart.series:
            value = s.values[i]
            if not value:
                continue
            h = plot_h * value / top
            base -= h
            parts.append(format_html(
                '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {} {}</title></rect>',
                _c(x), _c(base), _c(slot * 0.7), _c(h), s.color, label, number(value),
                s.name if len(chart.series) > 1 else chart.unit))
        if i % chart.every == 0:
            parts.append(format_html('<text x="{}" y="{}" text-anchor="middle" font-size="11" fill="{}">{}</text>',
                                     _c(LEFT + i * slot + slot / 2), HEIGHT - 6, AXIS, label))
    return _frame(chart, format_html_join("", "{}", ((p,) for p in parts)), _describe(chart))


def bars(chart: Chart) -> SafeString:
    """Horizontal bars, one per category, each with its number at its end."""
    values = chart.series[0].values if chart.series else []
    top = nice_max(max(values, default=0))
    label_w = 150
    row = (HEIGHT - TOP) / max(len(chart.labels), 1)
    plot_w = WIDTH - label_w - RIGHT - 30
    parts: list[SafeString] = []
    for i, label in enumerate(chart.labels):
        y = TOP + i * row
        w = plot_w * values[i] / top if values[i] else 0
        parts.append(format_html('<text x="{}" y="{}" text-anchor="end" font-size="12" fill="{}">{}</text>',
                                 label_w - 6, _c(y + row * 0.6), INK, label))
        parts.append(format_html(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {}</title></rect>',
            label_w, _c(y + row * 0.2), _c(max(w, 1)), _c(row * 0.6), chart.series[0].color, label, number(values[i])))
        parts.append(format_html('<text x="{}" y="{}" font-size="12" fill="{}">{}</text>',
                                 _c(label_w + max(w, 1) + 4), _c(y + row * 0.6), INK, number(values[i])))
    return _frame(chart, format_html_join("", "{}", ((p,) for p in parts)), _describe(chart))
