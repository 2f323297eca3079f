"""What a JSON value must be before any of it reaches a serializer, a service or PostgreSQL.

JSON itself admits strings that PostgreSQL cannot store — a NUL character (text columns refuse it,
``jsonb`` refuses ``\\u0000``) and lone UTF-16 surrogates (``"\\ud800"``, which UTF-8 cannot
encode) — numbers that overflow every column (``1e400`` parses to infinity, ``2**64`` overflows
``bigint``) and nesting deep enough to exhaust the interpreter's stack. One walk over the parsed
value finds the first such problem, at any depth and in object keys too, and names where it is
(``fact.value.tags[2]``) so the client can fix it.

The walk is iterative: it never recurses, whatever the depth of the value it is given.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memory.storable import printable, unstorable_problem

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class JsonProblem:
    path: str  # where, e.g. "fact.value.tags[2]" ("" for the whole body)
    message: str
    code: str = "invalid"  # or "too_deep"

    def sentence(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def max_depth() -> int:
    return int(settings.ENGRAM_MAX_JSON_DEPTH)


def _key_path(parent: str, key: str) -> str:
    name = printable(key)
    return f"{parent}.{name}" if parent else name


def _string_problem(text: str) -> str | None:
    problem = unstorable_problem(text)
    return problem + "." if problem else None


# What json.dumps(ensure_ascii=False) shows for each problem json_problem looks for: NUL is written as the
# escape \u0000, surrogates as themselves, infinities as Infinity, 64-bit overflows as 20+ digit runs.
_SUSPECT = re.compile(r"\\u0000|[\ud800-\udfff]|Infinity|NaN|\d{19}")


def json_problem(value: Any, *, path: str = "", depth_limit: int | None = None,
                 skip_items_of: frozenset[str] = frozenset()) -> JsonProblem | None:
    """The first problem of ``value`` in document order, or None when every part of it can be stored.

    ``skip_items_of`` names top-level keys whose list elements are checked by the caller one by one
    (batch endpoints answer a bad item with a per-item error instead of refusing the whole batch);
    those elements are still bounded in depth here, so a pathological body is refused before any
    per-item work starts.
    """
    limit = max_depth() if depth_limit is None else depth_limit
    # (value, path, depth, checked): "checked" is False inside skipped batch items, which are only measured
    # for depth (no path is built for them: a 500-item batch holds thousands of values).
    stack: list[tuple[Any, str, int, bool]] = [(value, path, 0, True)]
    while stack:
        item, where, depth, checked = stack.pop()
        if isinstance(item, dict | list) and depth >= limit:
            return JsonProblem(where, f"is nested more than {limit} levels deep.", code="too_deep")
        if not checked:
            children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            stack.extend((child, where, depth + 1, False) for child in children if isinstance(child, dict | list))
        elif isinstance(item, str):
            problem = _string_problem(item)
            if problem:
                return JsonProblem(where, problem)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return JsonProblem(where, "is an integer outside the signed 64-bit range.")
        elif isinstance(item, float):
            if not math.isfinite(item):
                return JsonProblem(where, "is a number too large to represent.")
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                key_where = _key_path(where, key)
                key_problem = _string_problem(key)
                if key_problem:
                    return JsonProblem(key_where, "the field name " + key_problem)
                if depth == 0 and key in skip_items_of and isinstance(child, list):
                    children.extend((element, f"{key_where}[{i}]", depth + 2, False)
                                    for i, element in enumerate(child))
                else:
                    children.append((child, key_where, depth + 1, True))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]", depth + 1, True) for i, child in reversed(list(enumerate(item))))
    return None


def item_problem_of(item: Any) -> JsonProblem | None:
    """json_problem for one batch item whose depth the body parser already bounded. Most items are clean:
    one C-speed serialisation tells, and only a suspect item is walked to name the offending value."""
    if not _SUSPECT.search(json.dumps(item, ensure_ascii=False)):
        return None
    return json_problem(item)
