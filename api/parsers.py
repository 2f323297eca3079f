"""The API's one body parser: JSON, checked as a whole before any view sees it.

Every JSON body goes through ``json_problem`` (api/json_values.py) here, so no endpoint can forget it:
NUL characters and lone surrogates (in values and in object keys, unknown fields included),
integers beyond 64 bits, infinite numbers and nesting deeper than ``ENGRAM_MAX_JSON_DEPTH`` are
refused with 400 and the path of the offending value. Views that accept a batch name the list
whose items they check one by one (``per_item_fields``), so a single bad item gets its own error
instead of failing the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions
from rest_framework.parsers import JSONParser

from api.json_values import JsonProblem, json_problem, max_depth


class TooDeep(exceptions.APIException):
    status_code = 400
    default_code = "too_deep"
    default_detail = "The JSON body is nested too deeply."


def refuse(problem: JsonProblem) -> exceptions.APIException:
    if problem.code == "too_deep":
        return TooDeep(problem.sentence())
    return exceptions.ValidationError({problem.path or "non_field_errors": [problem.message]})


class EngramJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:  # deeper than the interpreter's stack: far beyond our limit
            raise TooDeep(f"The JSON body is nested more than {max_depth()} levels deep.") from exc
        view = (parser_context or {}).get("view")
        per_item = frozenset(getattr(view, "per_item_fields", ()))
        problem = json_problem(data, skip_items_of=per_item)
        if problem is not None:
            raise refuse(problem)
        return data
