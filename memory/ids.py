"""Readable, sortable public ids: a type prefix and a ULID (``mem_01J...``)."""

import re

from ulid import ULID

# Every type prefix the service's ids carry. The secret scan knows its own ids by them (OWN_ID), so an id with a
# prefix missing here could be refused wherever it is quoted back; new_id refuses one.
PREFIXES = ("mem", "cand", "evt", "ret", "thr", "sum", "del", "prp")
# An id this service made: a type prefix and a ULID (Crockford's base32: no I, L, O or U).
OWN_ID = re.compile(rf"\b(?:{'|'.join(PREFIXES)})_[0-9A-HJKMNP-TV-Z]{{26}}\b")


def new_id(prefix: str) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}: add it to memory.ids.PREFIXES")
    return f"{prefix}_{ULID()}"


def new_memory_id() -> str:
    return new_id("mem")


def new_candidate_id() -> str:
    return new_id("cand")


def new_event_id() -> str:
    return new_id("evt")
