"""Workflow checkpoints (optimistic concurrency on ``version``) and side-effecting tool calls.

Preconditions for ``checkpoint_put``:
- ``If-Match: "<version>"`` replaces the checkpoint when its version is still that one;
- creating the first checkpoint takes ``If-None-Match: *`` (or, equivalently, ``If-Match: "0"``);
- no precondition -> 428 ``precondition_required``; a failed one -> 412 ``precondition_failed``,
  and nothing is written.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.audit import audit
from memory.errors import Conflict, InvalidInput, NotFound
from memory.policy.secrets import refuse_secrets
from memory.scope import WRITE, Scope
from memory.threads.errors import PreconditionFailed, PreconditionRequired
from memory.threads.models import Checkpoint, Thread, ToolCall
from memory.threads.services.common import request_hash

_ETAG = re.compile(r'^(?:W/)?"?(\d{1,9})"?$')


@dataclass(frozen=True)
class CheckpointState:
    current_step: str = ""
    completed_steps: list[Any] = field(default_factory=list)
    pending_approval: Any = None
    tool_call_id: str = ""
    idempotency_key: str = ""
    artifacts: dict[str, Any] = field(default_factory=dict)
    last_verified_outcome: Any = None
    thread_id: str | None = None


def etag(version: int) -> str:
    return f'"{version}"'


def expected_version(*, if_match: str | None, if_none_match: str | None) -> int:
    """The version the writer read: 0 means "there is no checkpoint yet"."""
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise InvalidInput('Only "If-None-Match: *" (create the first checkpoint) is supported.',
                               code="invalid_precondition")
        return 0
    if if_match is None or not if_match.strip():
        raise PreconditionRequired('Send If-Match: "<version>" from the ETag you read, or If-None-Match: * to '
                                   "create the first checkpoint.")
    match = _ETAG.match(if_match.strip())
    if match is None:
        raise InvalidInput('If-Match takes one version ETag such as "3".', code="invalid_precondition")
    return int(match.group(1))


def _failed(current: Checkpoint | None, expected: int) -> PreconditionFailed:
    now = current.version if current else 0
    return PreconditionFailed(f"The checkpoint is at version {now}, not {expected}; read it again and retry.",
                              extra={"current_version": now})


@transaction.atomic
def checkpoint_put(*, scope: Scope, workflow_id: str, state: CheckpointState, if_match: str | None = None,
                   if_none_match: str | None = None) -> tuple[Checkpoint, bool]:
    """Write the workflow's checkpoint if the precondition holds. Returns (checkpoint, created)."""
    scope.require(WRITE)
    scope.require_threads()
    expected = expected_version(if_match=if_match, if_none_match=if_none_match)
    refuse_secrets(asdict(state))
    thread = None
    if state.thread_id:
        thread = Thread.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                       pk=state.thread_id).first()
        if thread is None:
            raise InvalidInput(f"No thread '{state.thread_id}' in this scope.", code="unknown_thread")
    values = {k: v for k, v in asdict(state).items() if k != "thread_id"}
    # Race: two resuming workers both read version N and both write. The row lock orders them; the
    # second then sees version N+1 and gets 412 instead of silently overwriting the first.
    current = (Checkpoint.objects.select_for_update()
               .filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, workflow_id=workflow_id).first())
    if (current.version if current else 0) != expected:
        raise _failed(current, expected)
    if current is None:
        try:
            with transaction.atomic():  # two first writers: the unique index lets one through
                checkpoint = Checkpoint.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                                       workflow_id=workflow_id, version=1, thread=thread,
                                                       actor=scope.actor, **values)
        except IntegrityError:
            raise _failed(Checkpoint.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                                    workflow_id=workflow_id).first(), expected) from None
        created = True
    else:
        for name, value in values.items():
            setattr(current, name, value)
        current.thread = thread
        current.version += 1
        current.actor = scope.actor
        current.save()
        checkpoint, created = current, False
    audit(actor=scope.actor, action="checkpoint.put", object_type="checkpoint", object_id=workflow_id,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id, data={"version": checkpoint.version})
    return checkpoint, created


@transaction.atomic
def tool_call_record(*, scope: Scope, workflow_id: str, idempotency_key: str, tool: str,
                     arguments: dict[str, Any]) -> tuple[ToolCall, bool]:
    """Record a side-effecting call *before* the effect. The same key and body returns the record."""
    scope.require(WRITE)
    scope.require_threads()
    refuse_secrets({"idempotency_key": idempotency_key, "tool": tool, "arguments": arguments})
    digest = request_hash({"tool": tool, "arguments": arguments})
    try:
        with transaction.atomic():  # concurrent twins block on the unique index, then read its row
            call, created = ToolCall.objects.get_or_create(
                tenant_id=scope.tenant_id, subject_id=scope.subject_id, workflow_id=workflow_id,
                idempotency_key=idempotency_key,
                defaults={"tool": tool, "arguments": arguments, "request_hash": digest, "actor": scope.actor})
    except IntegrityError:
        call = ToolCall.objects.get(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                    workflow_id=workflow_id, idempotency_key=idempotency_key)
        created = False
    if not created and call.request_hash != digest:
        raise Conflict(f"Tool call '{idempotency_key}' was recorded with other arguments; use a new key.",
                       code="idempotency_conflict")
    if created:
        audit(actor=scope.actor, action="tool_call.record", object_type="tool_call", object_id=idempotency_key,
              tenant_id=scope.tenant_id, subject_id=scope.subject_id, data={"workflow_id": workflow_id,
                                                                            "tool": tool})
    return call, created


@transaction.atomic
def tool_call_complete(*, scope: Scope, workflow_id: str, idempotency_key: str, status: str,
                       outcome: Any) -> tuple[ToolCall, bool]:
    """Record the verified outcome once. Repeating the same outcome is a no-op; a different one is 409."""
    scope.require(WRITE)
    scope.require_threads()
    if status not in (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED):
        raise InvalidInput("status is succeeded or failed.", code="invalid_status")
    refuse_secrets({"outcome": outcome})
    call = (ToolCall.objects.select_for_update()
            .filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, workflow_id=workflow_id,
                    idempotency_key=idempotency_key).first())
    if call is None:
        raise NotFound(f"No tool call '{idempotency_key}' in workflow '{workflow_id}' in this scope.")
    if call.status != ToolCall.Status.PENDING:
        if call.status == status and call.outcome == outcome:
            return call, False
        raise Conflict(f"Tool call '{idempotency_key}' already has a recorded outcome ({call.status}).",
                       code="outcome_already_recorded")
    call.status, call.outcome, call.outcome_at = status, outcome, timezone.now()
    call.save(update_fields=["status", "outcome", "outcome_at", "updated_at"])
    audit(actor=scope.actor, action="tool_call.complete", object_type="tool_call", object_id=idempotency_key,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"workflow_id": workflow_id, "status": status})
    return call, True
