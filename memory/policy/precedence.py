"""Precedence policy: which record wins for one (subject, namespace, field). Code, not recency or distance.

Authority, highest first, exactly as the contract orders it. A lower authority never supersedes a
higher one; a newer record of the same authority supersedes the older; two org records that
disagree cannot be ordered by policy and become a stored Conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

AUTHORITY_ORDER: tuple[str, ...] = (
    "system_of_record",
    "explicit_user_statement",
    "org_record",
    "verified_outcome",
    "model_inferred",
    "summary",
)
# Sources whose disagreement policy cannot settle: both stand, a person decides.
UNORDERABLE_SAME_AUTHORITY = frozenset({"org_record"})


def rank(source_type: str) -> int:
    """0 is the highest authority."""
    return AUTHORITY_ORDER.index(source_type)


def outranks(a: str, b: str) -> bool:
    return rank(a) < rank(b)


class Outcome(StrEnum):
    ACTIVATE = "activate"  # nothing active: the new record becomes the head
    SUPERSEDE = "supersede"  # the new record replaces the current head(s)
    KEEP_INACTIVE = "keep_inactive"  # a higher authority stands: the new record is kept, not active
    CONFLICT = "conflict"  # policy cannot decide: both stand, surfaced for review


class Head(Protocol):
    source_type: str
    content_hash: str


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str


def decide(*, new_source_type: str, new_content_hash: str, heads: Sequence[Head]) -> Decision:
    """Decide how a new record relates to the active head(s) of its key."""
    if not heads:
        return Decision(Outcome.ACTIVATE, "no active record for this field")
    strongest = min(heads, key=lambda h: rank(h.source_type))
    if outranks(strongest.source_type, new_source_type):
        return Decision(
            Outcome.KEEP_INACTIVE,
            f"an active {strongest.source_type} record outranks {new_source_type}",
        )
    if outranks(new_source_type, strongest.source_type):
        return Decision(Outcome.SUPERSEDE, f"{new_source_type} outranks {strongest.source_type}")
    # Same authority.
    if new_source_type in UNORDERABLE_SAME_AUTHORITY and any(
        h.content_hash != new_content_hash for h in heads
    ):
        return Decision(Outcome.CONFLICT, f"two {new_source_type} records disagree; policy cannot decide")
    return Decision(Outcome.SUPERSEDE, f"newer {new_source_type} supersedes the older one")
