"""A per-tenant knowledge cache version in the shared cache backend.

Knowledge is shared by every reader of a domain, so a per-subject cache version (the memory
rule) cannot invalidate it. Anything that caches knowledge results must put
``knowledge_cache_version(tenant_id)`` in its key; every ingest and deletion bumps it (on commit),
which makes old entries unreachable on every node at once.
"""

from __future__ import annotations

from django.core.cache import cache


def _key(tenant_id: int) -> str:
    return f"engram:knowledge:version:{tenant_id}"


def knowledge_cache_version(tenant_id: int) -> int:
    return int(cache.get_or_set(_key(tenant_id), 1) or 1)


def bump_knowledge_cache_version(tenant_id: int) -> int:
    key = _key(tenant_id)
    cache.add(key, 1)
    try:
        return int(cache.incr(key))
    except ValueError:  # evicted between add and incr
        cache.set(key, 2)
        return 2
