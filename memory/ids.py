"""Readable, sortable public ids: a type prefix and a ULID (``mem_01J...``)."""

import re

from ulid import ULID

# An id this service made: a type prefix and a ULID (Crockford's base32: no I, L, O or U).
OWN_ID = re.compile(r"\b(?:mem|cand|evt|ret|thr|sum|del|prp)_[0-9A-HJKMNP-TV-Z]{26}\b")


def new_id(prefix: str) -> str:
    return f"{prefix}_{ULID()}"


def new_memory_id() -> str:
    return new_id("mem")


def new_candidate_id() -> str:
    return new_id("cand")


def new_event_id() -> str:
    return new_id("evt")
