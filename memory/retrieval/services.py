"""Writes of the retrieval area: the retrieval log and its expiry."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memory.retrieval.models import RetrievalLog, new_retrieval_id
from memory.scope import Scope

# A log quotes memory content: it lives no longer than the shortest retention of the classes it
# mentions, and never longer than this default.
DEFAULT_LOG_RETENTION = dt.timedelta(days=settings.ENGRAM_RETRIEVAL_LOG_DAYS)


# One statement: the log row, committed without waiting for the WAL flush. The row is visible to every reader
# at once (GET /retrievals/{id} right after the answer finds it); only its durability is relaxed: a server
# crash in the next few hundred milliseconds can lose the last logs, never make anything inconsistent. That
# is safe for a log of a read, and it keeps a disk flush out of every retrieve's answer.
_INSERT_LOG = """
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO retrieval_retrievallog (id, tenant_id, subject_id, actor, agent_key_id, query, request, candidates,
                                   budget, dropped, timings_ms, created_at, expires_at)
SELECT %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s FROM relaxed
"""


def retrieval_log_record(*, scope: Scope, query: str, request: dict[str, Any], candidates: list[dict[str, Any]],
                         budget: dict[str, int], dropped: dict[str, int], timings: dict[str, float],
                         retention: dt.timedelta | None) -> str:
    """Insert the log of one retrieve; returns its id. No audit row: a read changes no state, and the log
    itself is the record of the read."""
    keep = min(retention, DEFAULT_LOG_RETENTION) if retention else DEFAULT_LOG_RETENTION
    log_id = new_retrieval_id()
    now = timezone.now()
    # The writer's grant goes with the request: a narrower reader of the subject sees the query
    # only when its own grant covers it (memory/retrieval/selectors.py).
    request = {**request, "grant": None if scope.namespaces is None else list(scope.namespaces)}
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_LOG, [
            log_id, scope.tenant_id, scope.subject_id, scope.actor, scope.agent_key_id, query,
            json.dumps(request, default=str), json.dumps(candidates, default=str), json.dumps(budget),
            json.dumps(dropped), json.dumps(timings), now, now + keep])
    return log_id


@transaction.atomic
def retrieval_logs_purge_expired() -> int:
    """Delete logs past their retention (one bulk delete; run by purge_expired)."""
    deleted, _ = RetrievalLog.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
