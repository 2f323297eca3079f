"""PostgreSQL advisory locks, named by strings: the one place their SQL is written.

Row locks cannot serialise writers of something that has no row yet (a memory key's first
record, a document's first version), so writers lock a name instead. Transaction-scoped locks
are released at commit or rollback; a session lock (the deletion job's) is held across the
job's several transactions and released explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection


def lock(names: Iterable[str]) -> None:
    """Transaction-scoped locks on ``names``, taken in one statement in sorted order, so two
    writers that need overlapping sets cannot deadlock. Re-entrant within a transaction."""
    ordered = sorted(set(names))
    if not ordered:
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
                       "FROM unnest(%s::text[]) WITH ORDINALITY AS t(k, n)", [ordered])


def try_session_lock(name: str) -> bool:
    """Take a session lock on ``name`` if nobody holds it; False when it is taken."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [name])
        return bool(cursor.fetchone()[0])


def session_unlock(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [name])
