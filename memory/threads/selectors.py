"""Reads of thread state. Every query starts from ``_scoped(Model, scope)``, which asks the scope for
the read permission and the ``threads`` grant, then puts tenant AND subject in SQL.

"Does not exist" and "belongs to someone else" get the same 404, so ids are no existence oracle.
"""

from __future__ import annotations

from typing import TypeVar

from django.db import models

from memory.errors import NotFound
from memory.scope import READ, Scope
from memory.threads.models import Checkpoint, Summary, Thread, ThreadEvent, ToolCall

M = TypeVar("M", bound=models.Model)


def _scoped(model: type[M], scope: Scope) -> models.QuerySet[M]:
    scope.require(READ)
    scope.require_threads()
    return model._default_manager.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id)


def thread_get(*, scope: Scope, thread_id: str) -> Thread:
    thread = _scoped(Thread, scope).filter(pk=thread_id).first()
    if thread is None:
        raise NotFound(f"No thread '{thread_id}' in this scope.")
    return thread


def thread_list(*, scope: Scope, limit: int = 50, offset: int = 0) -> list[Thread]:
    return list(_scoped(Thread, scope).order_by("-updated_at", "-pk")[offset: offset + limit])


def thread_events(*, scope: Scope, thread_id: str, after: int = 0, before: int | None = None,
                  status: str | None = None, limit: int = 50, newest: bool = False) -> list[ThreadEvent]:
    """Events of one thread in seq order: the first ``limit`` after ``after``, or with ``newest`` the last
    ``limit`` (one query either way; the (tenant, subject, thread, seq) index serves both directions)."""
    thread = thread_get(scope=scope, thread_id=thread_id)
    qs = _scoped(ThreadEvent, scope).filter(thread=thread, seq__gt=after)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    if status:
        qs = qs.filter(status=status)
    if newest:
        return list(reversed(qs.order_by("-seq")[:limit]))
    return list(qs.order_by("seq")[:limit])


def thread_event_get(*, scope: Scope, thread_id: str, event_id: str) -> ThreadEvent:
    event = _scoped(ThreadEvent, scope).filter(thread_id=thread_id, pk=event_id).first()
    if event is None:
        raise NotFound(f"No event '{event_id}' in thread '{thread_id}' in this scope.")
    return event


def summary_latest_fresh(*, scope: Scope, thread_id: str) -> Summary:
    thread = thread_get(scope=scope, thread_id=thread_id)
    summary = (_scoped(Summary, scope).filter(thread=thread, status=Summary.Status.FRESH)
               .order_by("-to_seq", "-created_at").first())
    if summary is None:
        raise NotFound(f"Thread '{thread_id}' has no fresh summary.", code="no_fresh_summary")
    return summary


def summaries_of(*, scope: Scope, thread_id: str) -> list[Summary]:
    thread = thread_get(scope=scope, thread_id=thread_id)
    return list(_scoped(Summary, scope).filter(thread=thread).order_by("-created_at"))


def checkpoint_get(*, scope: Scope, workflow_id: str) -> Checkpoint:
    checkpoint = _scoped(Checkpoint, scope).filter(workflow_id=workflow_id).first()
    if checkpoint is None:
        raise NotFound(f"No checkpoint for workflow '{workflow_id}' in this scope.")
    return checkpoint


def tool_call_get(*, scope: Scope, workflow_id: str, key: str) -> ToolCall:
    call = _scoped(ToolCall, scope).filter(workflow_id=workflow_id, idempotency_key=key).first()
    if call is None:
        raise NotFound(f"No tool call '{key}' in workflow '{workflow_id}' in this scope.")
    return call
