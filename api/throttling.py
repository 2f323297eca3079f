"""Per-key rate limits (DRF throttles) whose counters every web process and node shares, in PostgreSQL.

DRF's SimpleRateThrottle keeps a list of every request time per client in Django's cache and rewrites it
on each request; on the database cache that is about six queries a request (the cache's set alone checks
its size, reads, then writes) and increments from two processes can overwrite each other. Here each
request is one atomic upsert of a small counter row (api.models.ThrottleCounter): requests are counted in
fixed windows of the rate's period, and the limit applies to a sliding window estimated from the current
and previous windows' counts (what most API gateways do). Refused requests are not counted, so a client
that waits Retry-After gets through.

Rates come from the environment (ENGRAM_THROTTLE_KEY_RATE, ENGRAM_THROTTLE_ANON_RATE; "off" turns one off).
A refused request gets 429 {"code": "throttled", "detail"} with Retry-After (api/exceptions.py).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import connection
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from api.client_ip import client_ip
from api.models import ThrottleCounter
from api.prefetch import hold_key
from api.principal import AgentPrincipal
from memory import metrics

# One statement: lock the client's row (or create it), roll the windows forward, count this request only if
# the sliding estimate leaves room for it, and say whether it did. About one request in a thousand also
# forgets the other clients idle for two windows (a bounded table); the coin is tossed once, in the
# statement, so the other requests' delete reads no row and every request is the same one statement. It is
# committed without waiting for the WAL flush (a crash can lose the last fraction of a second of counts, which
# only gives a client a little more room): no request waits on a disk flush behind another's writes to be counted.
_TABLE = ThrottleCounter._meta.db_table
_SAME = "t.window_index = EXCLUDED.window_index"
_CURRENT = f"(CASE WHEN {_SAME} THEN t.count ELSE 0 END)"
_PREVIOUS = (f"(CASE WHEN {_SAME} THEN t.previous WHEN t.window_index = EXCLUDED.window_index - 1 THEN t.count "
             "ELSE 0 END)")
_ROOM = f"({_PREVIOUS} * %(remaining)s + {_CURRENT} + 1 <= %(limit)s)"
_UPSERT = f"""
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)), forgotten AS (
    DELETE FROM {_TABLE} WHERE (SELECT random() < 0.001) AND window_index < %(window)s - 1 AND key <> %(key)s
)
INSERT INTO {_TABLE} AS t (key, window_index, count, previous, allowed)
SELECT %(key)s, %(window)s, 1, 0, 1 <= %(limit)s FROM relaxed
ON CONFLICT (key) DO UPDATE SET
    previous = {_PREVIOUS},
    allowed = {_ROOM},
    count = {_CURRENT} + CASE WHEN {_ROOM} THEN 1 ELSE 0 END,
    window_index = EXCLUDED.window_index
RETURNING allowed, count, previous
"""


class SlidingWindowThrottle(SimpleRateThrottle):
    metric_label = ""  # the ``limit`` label of engram_throttled_requests_total

    def __init__(self) -> None:
        self.rate = self.get_rate()
        limit, period = self.parse_rate(self.rate)
        self.limit, self.period = limit or 0, period or 1
        self.wait_seconds: float | None = None

    def clock(self) -> float:
        return time.time()

    def identity(self, request: Request) -> str | None:
        raise NotImplementedError

    def get_ident(self, request: Request) -> str:
        # Not DRF's: with NUM_PROXIES unset it takes any client's X-Forwarded-For as its address.
        return client_ip(request)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        ident = self.identity(request)
        return None if ident is None else f"{self.scope}:{ident}"

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.clock()
        window = int(now // self.period)
        elapsed = (now % self.period) / self.period
        with connection.cursor() as cursor:
            cursor.execute(_UPSERT, {"key": key, "window": window, "limit": self.limit, "remaining": 1.0 - elapsed})
            allowed, count, previous = cursor.fetchone()
        if not allowed:
            self.wait_seconds = self._wait(previous, count, elapsed)
            metrics.throttled(self.metric_label)
        return bool(allowed)

    def _wait(self, previous: int, current: int, elapsed: float) -> float:
        if previous and current + 1 <= self.limit:
            # previous * (1 - t) + current + 1 <= limit  =>  t >= 1 - (limit - current - 1) / previous
            needed = 1.0 - (self.limit - current - 1) / previous
            return max(0.0, (needed - elapsed) * self.period)
        return (1.0 - elapsed) * self.period

    def wait(self) -> float | None:
        return self.wait_seconds


class AgentKeyThrottle(SlidingWindowThrottle):
    """ENGRAM_THROTTLE_KEY_RATE per agent key, whichever process or node serves it."""

    scope = "agent_key"
    metric_label = "agent_key"

    def identity(self, request: Request) -> str | None:
        user = request.user
        return f"key:{user.key.pk}" if isinstance(user, AgentPrincipal) else None

    def allow_request(self, request: Request, view: Any) -> bool:
        allowed = super().allow_request(request, view)
        if not allowed and isinstance(request.user, AgentPrincipal):
            hold_key(request.user.key.pk, self.wait_seconds or 1.0)  # a refused call gets no early embedding
        return allowed


class AnonymousThrottle(SlidingWindowThrottle):
    """ENGRAM_THROTTLE_ANON_RATE per client address for requests without a valid agent key.

    Authentication runs before throttles, so a call with a wrong key is refused (401) before any view's
    throttle: those are counted by ``count_failed_key`` under this rate, which is what slows a client guessing
    keys. Health, the schema and the docs pages are not limited (served from memory, nothing to guess)."""

    scope = "anonymous"
    metric_label = "anonymous"

    def identity(self, request: Request) -> str | None:
        if isinstance(request.user, AgentPrincipal):
            return None
        return f"ip:{self.get_ident(request)}"


class FailedKeyThrottle(AnonymousThrottle):
    metric_label = "failed_key"

    def identity(self, request: Request) -> str | None:
        return f"bad-key:{self.get_ident(request)}"


def count_failed_key(request: Request) -> None:
    """Count a call whose agent key is unknown or revoked against its address: past the anonymous rate the
    answer is 429 instead of 401, so guessing keys costs time."""
    throttle = FailedKeyThrottle()
    if not throttle.allow_request(request, None):
        raise exceptions.Throttled(throttle.wait())
