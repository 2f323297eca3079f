"""Writes of the retrieval area: the retrieval log and its expiry."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.retrieval.models import RetrievalLog
from memory.scope import Scope

# A log quotes memory content: it lives no longer than the shortest retention of the classes it
# mentions, and never longer than this default.
DEFAULT_LOG_RETENTION = dt.timedelta(days=settings.ENGRAM_RETRIEVAL_LOG_DAYS)


def retrieval_log_record(*, scope: Scope, query: str, request: dict[str, Any], candidates: list[dict[str, Any]],
                         budget: dict[str, int], dropped: dict[str, int], timings: dict[str, float],
                         retention: dt.timedelta | None) -> RetrievalLog:
    # No audit row: a read changes no state, and the log itself is the record of the read. One
    # INSERT is atomic on its own; no transaction (or savepoint) is needed around it.
    keep = min(retention, DEFAULT_LOG_RETENTION) if retention else DEFAULT_LOG_RETENTION
    return RetrievalLog.objects.create(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, actor=scope.actor, agent_key_id=scope.agent_key_id,
        # The writer's grant goes with the request: a narrower reader of the subject sees the query
        # only when its own grant covers it (memory/retrieval/selectors.py).
        query=query, request={**request, "grant": None if scope.namespaces is None else list(scope.namespaces)},
        candidates=candidates, budget=budget, dropped=dropped, timings_ms=timings,
        expires_at=timezone.now() + keep,
    )


@transaction.atomic
def retrieval_logs_purge_expired() -> int:
    """Delete logs past their retention (one bulk delete; run by purge_expired)."""
    deleted, _ = RetrievalLog.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
