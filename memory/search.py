"""What every full-text and vector query of the project shares: the text-search configuration,
the OR-query builder, and the literal form of a vector for raw SQL."""

from __future__ import annotations

import functools
import re

from django.contrib.postgres.search import SearchQuery

# One configuration for every tsvector and every tsquery: a vector built with one and searched
# with another silently stops matching.
TEXT_SEARCH_CONFIG = "english"

# websearch_to_tsquery joins words with AND; a question rarely repeats every word of a stored text,
# so the words are OR-ed (each whitespace chunk stays one websearch term: "ORD-4417" keeps its parts).
_WORD = re.compile(r"[^\s\"'()<>!|&:*\\]+")
_OPERATORS = {"or", "and", "not"}


def or_terms(text: str) -> str:
    words = [w.lstrip("-") for w in _WORD.findall(text)]
    return " or ".join(w for w in words if w and w.lower() not in _OPERATORS)


def or_query(text: str) -> SearchQuery | None:
    """Any word of ``text`` matching, as one websearch query; None when ``text`` has no word."""
    expression = or_terms(text)
    if not expression:
        return None
    return SearchQuery(expression, search_type="websearch", config=TEXT_SEARCH_CONFIG)


def vector_literal(vector: list[float]) -> str:
    """pgvector's text form, for ``%s::vector`` parameters of raw SQL."""
    # One %-format of the whole vector: measured 40% cheaper than formatting each number on its own,
    # which an import's embedding writes pay for every record.
    return _vector_template(len(vector)) % tuple(map(float, vector))


@functools.cache
def _vector_template(dimensions: int) -> str:
    return "[" + ",".join(["%.7g"] * dimensions) + "]"
