"""Words people use: one vocabulary for statuses and plain-language provenance, shared by every page.

Pages never print an internal code (``explicit_user_statement``, ``superseded``) as the text a person reads;
they print these words, and keep the code in a ``data-status`` attribute for scripts and tests.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from memory.models import Confidence, SourceType

# code -> (word, tone). One word per code everywhere: /me/, the review queue, procedures, deletions.
STATUS_WORDS: dict[str, tuple[str, str]] = {
    # memory records (``candidate`` is an active record of confidence "candidate")
    "active": ("Current", "ok"),
    "candidate": ("Unconfirmed guess", "warn"),
    "superseded": ("Replaced", ""),
    "expired": ("Expired", ""),
    "deleted": ("Deleted", "bad"),
    "deleting": ("Being deleted", "warn"),
    # candidates and conflicts in the review queue
    "review": ("Waiting for review", "warn"),
    "pending": ("Waiting", "warn"),
    "retrievable": ("Served as a guess", "warn"),
    "merged": ("Merged", ""),
    "approved": ("Approved", "ok"),
    "rejected": ("Rejected", "bad"),
    "discarded": ("Discarded", ""),
    "open": ("Open conflict", "warn"),
    "resolved": ("Resolved", "ok"),
    # procedure proposals
    "stale": ("Out of date", "warn"),
    "current": ("Current", "ok"),
    # deletion jobs and their steps
    "running": ("In progress", "warn"),
    "completed": ("Completed", "ok"),
    "done": ("Done", "ok"),
    "failed": ("Failed", "bad"),
    # worker health
    "ok": ("Running", "ok"),
    "down": ("Not running", "bad"),
}


def status_word(code: str) -> tuple[str, str]:
    """The word and tone for ``code``; an unknown code is shown as itself, never hidden."""
    return STATUS_WORDS.get(code, (code.replace("_", " ").capitalize(), ""))


SOURCE_WORDS: dict[str, str] = {
    SourceType.EXPLICIT_USER_STATEMENT: "You said it",
    SourceType.MODEL_INFERRED: "The assistant guessed it",
    SourceType.VERIFIED_OUTCOME: "Something that happened",
    SourceType.SYSTEM_OF_RECORD: "Another system",
    SourceType.ORG_RECORD: "Your organisation",
    SourceType.SUMMARY: "A conversation summary",
}


@dataclass(frozen=True)
class Provenance:
    """Where a memory came from, in words: ``lead`` [``: “quote”``] ``— date`` [``— not confirmed``]."""

    lead: str
    quote: str = ""
    date: dt.datetime | None = None
    unconfirmed: bool = False


def _system_name(source_ref: Any) -> str:
    system = str(source_ref.get("system", "")).strip() if isinstance(source_ref, dict) else ""
    if not system:
        return "From another system"
    return f"From {system}" if "system" in system.lower() else f"From the {system} system"


def provenance(*, source_type: str, confidence: str, quote: str, date: dt.datetime | None,
               source_ref: Any = None, confirmed_guess: bool = False) -> Provenance:
    """The sentence a person reads for a record's source (``quote`` is the source event's words, if any)."""
    if source_type == SourceType.EXPLICIT_USER_STATEMENT:
        if confirmed_guess:
            return Provenance("You confirmed the assistant's guess", date=date)
        return Provenance("You said" if quote else "You said this", quote, date)
    if source_type == SourceType.MODEL_INFERRED:
        if confidence == Confidence.CANDIDATE:
            return Provenance("The assistant guessed this" + (" from" if quote else ""), quote, date,
                              unconfirmed=True)
        return Provenance("The assistant guessed this and a reviewer approved it", date=date)
    if source_type == SourceType.VERIFIED_OUTCOME:
        return Provenance("Recorded when it happened", quote, date)
    if source_type == SourceType.SYSTEM_OF_RECORD:
        return Provenance(_system_name(source_ref), date=date)
    if source_type == SourceType.ORG_RECORD:
        return Provenance("From your organisation's records", date=date)
    if source_type == SourceType.SUMMARY:
        return Provenance("From a summary of your conversations", date=date)
    return Provenance(f"From {source_type.replace('_', ' ')}", quote, date)
