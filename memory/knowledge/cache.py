"""A per-tenant knowledge cache version in the shared cache backend.

Knowledge is shared by every reader of a domain, so a per-subject cache version (the memory
rule) cannot invalidate it. Anything that caches knowledge results must put
``knowledge_cache_version(tenant_id)`` in its key; every ingest and deletion bumps it (on commit),
which makes old entries unreachable on every node at once.

A missing key (never set, culled, evicted) starts at the current time in nanoseconds rather than
at 1, so the version never goes back to a value an old cache entry was keyed on.
"""

from __future__ import annotations

import time

from django.core.cache import cache


def _key(tenant_id: int) -> str:
    return f"engram:knowledge:version:{tenant_id}"


def knowledge_cache_version(tenant_id: int) -> int:
    return int(cache.get_or_set(_key(tenant_id), time.time_ns, timeout=None) or time.time_ns())


def bump_knowledge_cache_version(tenant_id: int) -> int:
    key = _key(tenant_id)
    try:
        return int(cache.incr(key))
    except ValueError:  # missing: a fresh start is already above every earlier version
        value = time.time_ns()
        cache.set(key, value, timeout=None)
        return value
