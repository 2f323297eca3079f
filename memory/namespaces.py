"""Namespaces are paths of lowercase segments: ["user", "travel_preferences"] <-> "user/travel_preferences".

They are stored as one text column so that "under this prefix" is a btree-indexable SQL predicate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from django.db.models import Q

# A name: a namespace segment, a kind, a field, an access domain or a procedure. \A and \Z, not ^ and $:
# "$" also matches before a trailing newline, and "health\n" must not pass for "health".
NAME = re.compile(r"\A[a-z0-9][a-z0-9_\-.]{0,63}\Z")
MAX_DEPTH = 8


class InvalidNamespace(ValueError):
    pass


def to_path(namespace: Sequence[str] | str) -> str:
    """Validate a namespace given as a list (API) or a "a/b" string (query strings, commands)."""
    segments = namespace.split("/") if isinstance(namespace, str) else list(namespace)
    if not segments or len(segments) > MAX_DEPTH:
        raise InvalidNamespace(f"a namespace has 1 to {MAX_DEPTH} segments")
    for segment in segments:
        if not isinstance(segment, str) or not NAME.match(segment):
            raise InvalidNamespace(
                f"namespace segment {segment!r} must be lowercase letters, digits, '_', '-' or '.'"
            )
    return "/".join(segments)


def to_list(path: str) -> list[str]:
    return path.split("/")


def is_under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def intersect_prefixes(a: Iterable[str] | None, b: Iterable[str] | None) -> list[str] | None:
    """Intersection of two prefix sets; None means "everything"."""
    if a is None:
        return None if b is None else sorted(set(b))
    if b is None:
        return sorted(set(a))
    result: set[str] = set()
    for x in a:
        for y in b:
            if is_under(y, x):
                result.add(y)
            elif is_under(x, y):
                result.add(x)
    return sorted(result)


def under_any_q(prefixes: Iterable[str], field: str = "namespace") -> Q:
    """SQL predicate: ``field`` equals or lies under one of ``prefixes``. No prefixes -> matches nothing."""
    q = Q(pk__in=[])
    for prefix in prefixes:
        q |= Q(**{field: prefix}) | Q(**{f"{field}__startswith": prefix + "/"})
    return q
