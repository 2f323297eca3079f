"""Planner statistics for the tables an import fills before autovacuum has looked at them.

A write checks its foreign keys against rows written in the same transaction: each record's source event,
each pending window's record. PostgreSQL plans that check once per connection and keeps the plan. On a table
it holds no statistics for, every index that starts with ``tenant_id`` looks as selective as the primary key
(one row estimated either way), and the planner may take one of them: the check then reads every row of the
tenant, once per row written, and an import into a fresh database slowed as it grew (measured in process,
2,500 turns after the first 500: 0.07 ms per record with statistics, 0.4-2 ms without). Autovacuum analyses
the table in its own time (a minute or more); the worker that follows a write does it at once, the first time
it finds a written table without statistics. ANALYZE ends every connection's kept plans of the table, so the
next write plans its checks again, with the table's real size.

The same question for the tables a large subject's indexed statement reads, asked when its indexes are built
(``stale_tables``; memory/retrieval/subject_index.py).
"""

from __future__ import annotations

import logging

from django.db import OperationalError, connection, transaction

logger = logging.getLogger(__name__)

# The tables whose rows a write's own foreign keys point at, inside the write's transaction.
REFERENCED_IN_WRITES = ("memory_event", "memory_memoryrecord")
LOCK_TIMEOUT = "5s"
_known: set[str] = set()  # tables found with statistics by this process: they keep them


def tables_without_statistics(tables: tuple[str, ...]) -> list[str]:
    """Those of ``tables`` without column statistics (never analysed, or analysed while empty)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c "
            "WHERE c.relname = ANY(%s) AND c.relnamespace = current_schema()::regnamespace "
            "AND NOT EXISTS (SELECT 1 FROM pg_stats s WHERE s.schemaname = current_schema() "
            "                AND s.tablename = c.relname AND s.attname = 'tenant_id') "
            "ORDER BY c.relname", [list(tables)])
        return [row[0] for row in cursor.fetchall()]


# The share of a table's rows that may change before its statistics are taken again: autovacuum's own default
# (autovacuum_analyze_scale_factor), so nothing is analysed sooner than autovacuum would for a reason it also sees.
STALE_SHARE = 0.1


def stale_tables(tables: tuple[str, ...], *, rows_written: int = 0) -> list[str]:
    """Those of ``tables`` whose statistics no longer describe them: never taken, or more rows changed since they
    were taken than STALE_SHARE of the rows they counted, or ``rows_written`` is more than that share.

    ``rows_written`` is what the caller knows it added (a subject's rows): the changes counted since the last
    analysis lag the writes of other connections by up to a few seconds, so a fresh import may not show there yet."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
            "WHERE c.relname = ANY(%(tables)s) AND c.relnamespace = current_schema()::regnamespace "
            "AND (c.reltuples < 0 OR c.relname = ANY(%(unknown)s) "
            "     OR greatest(coalesce(s.n_mod_since_analyze, 0), %(written)s) > %(share)s * greatest(c.reltuples, 1)) "
            "ORDER BY c.relname",
            {"tables": list(tables), "unknown": tables_without_statistics(tables), "written": rows_written,
             "share": STALE_SHARE})
        return [row[0] for row in cursor.fetchall()]


def _has_rows(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')  # noqa: S608 - a name from our own list
        return bool(cursor.fetchone()[0])


def analyse(tables: tuple[str, ...]) -> bool:
    """ANALYZE ``tables`` (names from our own code); False when another maintenance held them past the lock timeout
    (autovacuum analyses them in its own time then)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute("ANALYZE " + ", ".join(f'"{t}"' for t in tables))
    except OperationalError:
        logger.warning("ANALYZE of %s waited more than %s; left to autovacuum", ", ".join(tables), LOCK_TIMEOUT)
        return False
    return True


def analyse_written_tables(tables: tuple[str, ...] = REFERENCED_IN_WRITES) -> list[str]:
    """ANALYZE those of ``tables`` that hold rows and no statistics yet; returns the ones analysed. Once a table
    has statistics this process does not look again (they are only ever replaced)."""
    todo = tuple(t for t in tables if t not in _known)
    if not todo:
        return []
    missing = tables_without_statistics(todo)
    _known.update(t for t in todo if t not in missing)
    filled = tuple(t for t in missing if _has_rows(t))
    if not filled or not analyse(filled):
        return []
    _known.update(filled)
    return list(filled)
