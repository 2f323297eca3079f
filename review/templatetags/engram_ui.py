"""Template tags shared by every page: ``{% status_badge code %}``, ``{% provenance_text p %}``, and the
filters every page shows a memory's value with: ``{{ value|show_value }}`` (HTML for people),
``{{ value|value_text }}`` (one line, for attributes) and ``{{ key|label }}`` (``order_id`` → "Order id")."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from review import values
from review.words import SOURCE_WORDS, Provenance, status_word

register = template.Library()


@register.simple_tag
def status_badge(code: str, element_id: str = "") -> SafeString:
    """A badge with the status in words; the code stays in ``data-status``."""
    word, tone = status_word(str(code))
    id_attr = format_html(' id="{}"', element_id) if element_id else ""
    return format_html('<span class="badge {}" data-status="{}"{}>{}</span>', tone, code, id_attr, word)


@register.simple_tag
def provenance_text(p: Provenance) -> SafeString:
    """“You said: “Put me on the aisle” — 3 May 2026”, with the quote in its own span."""
    parts = [format_html('<span class="lead">{}</span>', p.lead)]
    if p.quote:
        parts.append(format_html(': <span class="quote">“{}”</span>', p.quote))
    if p.date:
        when = timezone.localtime(p.date) if timezone.is_aware(p.date) else p.date
        parts.append(format_html(' — <time datetime="{}">{}</time>', when.isoformat(), f"{when.day} {when:%B %Y}"))
    if p.unconfirmed:
        parts.append(format_html(' — <strong class="unconfirmed">{}</strong>', "not confirmed"))
    return format_html_join("", "{}", ((part,) for part in parts))


@register.filter
def get_item(mapping: dict, key: str) -> object:
    """``{{ counts|get_item:status }}``: a dict entry by a variable key (None when absent)."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def source_word(code: str) -> str:
    """A record's source type in words ("You said it", "The assistant guessed it", ...)."""
    return SOURCE_WORDS.get(code, str(code).replace("_", " "))


@register.filter
def show_value(value: Any) -> SafeString:
    """A fact's value for people: fields with labels, lists as lists, long text behind "Show all"."""
    return values.value_html(value)


@register.filter
def value_text(value: Any) -> str:
    """The value as one line of plain text (autoescaped by the template like any string)."""
    return values.value_text(value)


@register.filter
def label(key: Any) -> str:
    return values.label(key)
