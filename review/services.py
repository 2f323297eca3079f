"""Writes made from the people's pages. Each one is a thin call into the memory services, so the write
gate (permission, secret scan, precedence, audit) and the deletion job are the same ones the API uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from memory.content import unseal
from memory.deletion.models import DeletionJob
from memory.deletion.services import memory_delete
from memory.errors import Conflict, EngramError
from memory.models import Confidence, RecordStatus
from memory.records.selectors import effective_status, memory_get
from memory.records.services import CorrectionResult, memory_correct
from memory.scope import Scope

MAX_BULK_DELETE = 200


@transaction.atomic
def guess_confirm(*, scope: Scope, memory_id: str) -> CorrectionResult:
    """"That's right": the person states the assistant's guess as their own.

    It goes through the correction service (as ``POST /api/v1/memories/{id}/correct`` does): a new
    explicit statement with the guess's value and sentence, written by the write gate with the person
    as the actor, which supersedes the guess. The correction path is used rather than a fresh
    ``memory_write`` because a guess lives in a class where agents may only propose; the person is
    not an agent, and the correction service writes in the guessed record's own class.
    """
    record = memory_get(scope=scope, memory_id=memory_id)
    if record.confidence != Confidence.CANDIDATE or effective_status(record) != RecordStatus.ACTIVE:
        raise Conflict("Only a current, unconfirmed guess can be confirmed.", code="not_a_guess")
    fact, text = unseal(record)
    return memory_correct(scope=scope, memory_id=memory_id, value=fact.get("value"), text=text)


@dataclass
class BulkDeletion:
    jobs: list[DeletionJob] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def memories_delete(*, scope: Scope, memory_ids: list[str]) -> BulkDeletion:
    """One deletion job per memory through the deletion service (each in its own transaction, so one
    that cannot be deleted does not hold back the others). Asking twice returns the same jobs."""
    result = BulkDeletion()
    for memory_id in list(dict.fromkeys(memory_ids))[:MAX_BULK_DELETE]:
        try:
            result.jobs.append(memory_delete(scope=scope, memory_id=memory_id))
        except EngramError as exc:
            result.failed[memory_id] = exc.detail
    return result
