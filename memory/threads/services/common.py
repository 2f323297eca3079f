"""Helpers shared by the thread services: keyed payload hashes and the thread lock."""

from __future__ import annotations

import json
from typing import Any

from memory.errors import NotFound
from memory.scope import Scope
from memory.threads.models import Thread
from memory.tombstones import keyed_hash


def request_hash(payload: dict[str, Any]) -> str:
    # Keyed (HMAC with a key derived from SECRET_KEY): the hash of a deleted event's body stays in
    # place for idempotent replays, and must not let someone with table access confirm a guess.
    return keyed_hash("thread-request:" + json.dumps(payload, sort_keys=True, default=str))


def lock_thread(scope: Scope, thread_id: str) -> Thread:
    """Lock one thread of the scope (404 otherwise).

    Race: every writer of a thread (appends, deletions, summary writes, regeneration) takes this row lock,
    so sequence numbers are handed out one at a time and a summary is never stored from a snapshot
    that a concurrent deletion blanked (summaries draft outside it and re-check their sources under it).
    """
    thread = (Thread.objects.select_for_update()
              .filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, pk=thread_id).first())
    if thread is None:
        raise NotFound(f"No thread '{thread_id}' in this scope.")
    return thread
