"""Where a deletion's markers (the deleted records' sentences, values and event words) could still show: the same
test in Python, on what a read surface returns, and in SQL, to read only the rows that could quote one.

A read check that reads a whole subject (its list, its export) narrows its rows in SQL first: a subject of 100,000
records is then checked in the time of the rows that quote a marker, not of building 100,000 payloads. The SQL test
is looser than the Python one, never stricter: a row is read when any of its content columns contains a marker as
written or as JSON text writes it, and always when a column is sealed (its plaintext is not readable in SQL)."""

from __future__ import annotations

import functools
import json
from typing import Any

from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from memory.content import TEXT_PREFIX


@functools.lru_cache(maxsize=8)
def forms(markers: tuple[str, ...]) -> frozenset[str]:
    """Each marker as written and as it appears inside JSON text (quotes and backslashes escaped); computed once per
    set of markers, since a check tests every row it reads against them."""
    return frozenset(f for m in markers for f in (m, json.dumps(m, ensure_ascii=False)[1:-1]))


def contains_marker(value: Any, markers: tuple[str, ...]) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return any(m in text for m in forms(markers))


# Past this many markers (an erasure's: every sentence of the subject) the rows are not narrowed. The filter tests
# every row against every marker in each form and column, and building a row's payload costs about as much as a
# hundred and fifty markers' tests (measured: 130 µs a payload, 0.1 µs a test, 8 tests a marker).
MAX_NARROWING_MARKERS = 100


def may_quote(qs: QuerySet[Any], markers: tuple[str, ...], *, text: tuple[str, ...] = (),
              json_fields: tuple[str, ...] = ()) -> QuerySet[Any]:
    """The rows of ``qs`` whose ``text`` columns (or lookups: ``source_event__text``) or ``json_fields`` contain a
    marker, or whose text columns are sealed; every row of ``qs`` past MAX_NARROWING_MARKERS markers."""
    if len(markers) > MAX_NARROWING_MARKERS:
        return qs
    match = Q(pk__in=[])
    for column in text:
        match |= Q(**{f"{column}__startswith": TEXT_PREFIX})
    casts = {f"_{name}_text": Cast(name, TextField()) for name in json_fields}
    for marker in forms(markers):
        for column in (*text, *casts):
            match |= Q(**{f"{column}__contains": marker})
    return qs.annotate(**casts).filter(match) if casts else qs.filter(match)
