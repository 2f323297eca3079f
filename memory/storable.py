"""What PostgreSQL cannot store in a text column: NUL, and surrogate code points (UTF-8 has no encoding for them).

Shared by the API's input rules (api/json_values.py) and the people's pages (review/middleware.py), so both refuse
the same characters and name them the same way."""

from __future__ import annotations

import json
import re

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with control characters and surrogates escaped, safe to put in a response."""
    if text.isprintable() and not UNSTORABLE.search(text):
        return text
    return json.dumps(text, ensure_ascii=True)[1:-1]


def unstorable_problem(text: str) -> str | None:
    """What is wrong with ``text`` for PostgreSQL, as the end of a sentence naming where it is, or None."""
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000), which cannot be stored"
    return f"contains a lone surrogate ({printable(found.group())}), which is not valid Unicode text"
