"""The in-process deletion check below the API: every text-like column of every table, scanned.

``retrieval_retrievallog.query`` is left out on purpose: it holds what a *caller* typed (the
isolation probes search for the owner's sentences from other principals), not stored content;
the log's ``candidates`` column, which quotes stored content, is scanned.
"""

from __future__ import annotations

from django.db import connection

TEXTUAL = ["text", "character varying", "json", "jsonb", "tsvector", "ARRAY"]
# The log's ``quotes`` is derived by the database from ``query`` and the ``candidates`` texts: the second is
# scanned itself, the first is the caller's own words.
CALLER_INPUT = {("retrieval_retrievallog", "query"), ("retrieval_retrievallog", "quotes")}


def marker_counts(needle: str) -> dict[str, int]:
    """Rows per ``table.column`` whose text form contains ``needle`` (case-insensitive).

    The runner takes these counts before its first write and compares after each deletion, so a
    kept earlier run (``--keep``) or unrelated data cannot make a clean deletion look dirty."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "JOIN information_schema.tables USING (table_schema, table_name) "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND data_type = ANY(%s) "
            "ORDER BY table_name, column_name", [TEXTUAL])
        columns = [c for c in cursor.fetchall() if c not in CALLER_INPUT]
        counts = {}
        for table, column in columns:
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s', [f"%{needle}%"])
            found = cursor.fetchone()[0]
            if found:
                counts[f"{table}.{column}"] = int(found)
    return counts


def new_hits(needle: str, baseline: dict[str, int]) -> list[str]:
    return [column for column, n in marker_counts(needle).items() if n > baseline.get(column, 0)]
