"""Readable, sortable public ids: a type prefix and a ULID (``mem_01J...``)."""

from ulid import ULID


def new_id(prefix: str) -> str:
    return f"{prefix}_{ULID()}"


def new_memory_id() -> str:
    return new_id("mem")


def new_candidate_id() -> str:
    return new_id("cand")


def new_event_id() -> str:
    return new_id("evt")
