"""A memory's value as a person reads it: never a Python ``repr`` or JSON with its quotes and braces.

A fact's value is any JSON value. Pages show a scalar as itself, an object as its fields (each with a
readable label: ``order_id`` → "Order id"), a list as a list, and empty values as a word; a long string,
and the tail of a long list or object, sit behind a ``<details>`` (one click, no script). Every string is
escaped by ``format_html``: a stored value can never add markup to a page.

``value_text`` is the same value as one line of plain text, for attributes (``aria-label``) and titles.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

SHORT = 120  # characters of a string shown before "Show all"
ITEMS = 8  # list items or object fields shown before "Show N more"
DEPTH = 5  # deeper levels are shown as one line of text
EMPTY = "(empty)"

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def label(key: Any) -> str:
    """``order_id`` → "Order id", ``orderId`` → "Order id", ``seat-preference`` → "Seat preference"."""
    words = _CAMEL.sub(" ", str(key)).replace("_", " ").replace("-", " ").split()
    if not words:
        return str(key)
    text = " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)
    return text[0].upper() + text[1:]


def _scalar(value: Any) -> str:
    if value is None:
        return EMPTY
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, float):
        return f"{round(value, 6):g}" if abs(value) < 1e15 else str(value)
    return str(value)


def value_text(value: Any, depth: int = 0) -> str:
    """One line: "Route MUC-LIS, Order id ORD-2026-0042"; lists joined by commas, nested parts in parentheses."""
    if isinstance(value, dict):
        if not value:
            return EMPTY
        parts = [f"{label(k)} {value_text(v, depth + 1)}" for k, v in value.items()]
        text = ", ".join(parts)
        return f"({text})" if depth else text
    if isinstance(value, list | tuple):
        if not value:
            return "(none)"
        text = ", ".join(value_text(v, depth + 1) for v in value)
        return f"({text})" if depth else text
    if isinstance(value, str) and not value.strip():
        return EMPTY
    return _scalar(value)


def _string(text: str) -> SafeString:
    if len(text) <= SHORT:
        return format_html('<span class="v-text">{}</span>', text)
    # The whole value is inside the details; the summary shows its start (hidden once open, by CSS).
    return format_html('<details class="v-long"><summary><span class="v-short">{}…</span> '
                       '<span class="v-more">Show all ({} characters)</span></summary>'
                       '<span class="v-text">{}</span></details>', text[:SHORT].rstrip(), len(text), text)


def _more(parts: list[SafeString], noun: str, tag: str, css: str) -> SafeString:
    """The first ITEMS parts in ``tag``, the rest behind "Show N more"."""
    shown = format_html_join("", "{}", ((p,) for p in parts[:ITEMS]))
    block = format_html('<{} class="{}">{}</{}>', mark_safe(tag), css, shown, mark_safe(tag))
    rest = parts[ITEMS:]
    if not rest:
        return block
    hidden = format_html_join("", "{}", ((p,) for p in rest))
    return format_html('{}<details class="v-rest"><summary>Show {} more {}</summary><{} class="{}">{}</{}></details>',
                       block, len(rest), noun, mark_safe(tag), css, hidden, mark_safe(tag))


def value_html(value: Any, depth: int = 0) -> SafeString:
    """The value as HTML for people (see the module's docstring)."""
    if depth >= DEPTH and isinstance(value, dict | list | tuple):
        return format_html('<span class="v-text">{}</span>', value_text(value))
    if isinstance(value, dict):
        if not value:
            return format_html('<span class="v-empty muted">{}</span>', EMPTY)
        fields = [format_html('<div class="v-field"><dt>{}</dt><dd>{}</dd></div>', label(k), value_html(v, depth + 1))
                  for k, v in value.items()]
        return _more(fields, "fields", "dl", "v-object")
    if isinstance(value, list | tuple):
        if not value:
            return format_html('<span class="v-empty muted">{}</span>', "(none)")
        items = [format_html("<li>{}</li>", value_html(v, depth + 1)) for v in value]
        return _more(items, "items", "ul", "v-list")
    if value is None or (isinstance(value, str) and not value.strip()):
        return format_html('<span class="v-empty muted">{}</span>', EMPTY)
    if isinstance(value, str):
        return _string(value)
    kind = "v-bool" if isinstance(value, bool) else "v-number" if isinstance(value, int | float) else "v-text"
    return format_html('<span class="{}">{}</span>', kind, _scalar(value))
