"""Offset paging of the list endpoints: ``?limit=&offset=`` in, ``{"results", "next_offset"}`` out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rest_framework import serializers

from api.fields import integer


class PageIn(serializers.Serializer):
    """The paging query parameters; a list endpoint's filters extend it."""

    limit = integer(min_value=1, max_value=200, default=50)
    offset = integer(min_value=0, default=0)  # bounded: 2**63 would overflow the query's OFFSET


def window(params: dict[str, Any]) -> slice:
    """The rows to fetch: the page and one more, which says whether a next page exists."""
    return slice(params["offset"], params["offset"] + params["limit"] + 1)


def page_body(found: Sequence[Any], params: dict[str, Any], payload: Callable[[Any], Any]) -> dict[str, Any]:
    """The response body for the rows fetched through ``window``."""
    limit = params["limit"]
    return {"results": [payload(r) for r in found[:limit]],
            "next_offset": params["offset"] + limit if len(found) > limit else None}
