"""Assertions shared by the deletion and /me/ tests: content absent from every table of the database."""

from __future__ import annotations

from typing import Any

from django.db import connection

TEXTUAL = ("text", "character varying", "json", "jsonb", "tsvector", "ARRAY")


def tables_containing(needle: str) -> list[str]:
    """Every table.column of the public schema whose text form contains ``needle`` (case-insensitive)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "JOIN information_schema.tables USING (table_schema, table_name) "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND data_type = ANY(%s)",
            [list(TEXTUAL)])
        columns = cursor.fetchall()
        hits = []
        for table, column in columns:
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s', [f"%{needle}%"])
            if cursor.fetchone()[0]:
                hits.append(f"{table}.{column}")
    return hits


def rows_referencing(table: str, pk: Any) -> dict[str, int]:
    """Rows in any table whose foreign key points at ``table``'s row ``pk``."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT kcu.table_name, kcu.column_name
            FROM information_schema.table_constraints tc
            JOIN information_schema.key_column_usage kcu ON tc.constraint_name = kcu.constraint_name
            JOIN information_schema.constraint_column_usage ccu ON tc.constraint_name = ccu.constraint_name
            WHERE tc.constraint_type = 'FOREIGN KEY' AND ccu.table_name = %s""", [table])
        found = {}
        # A composite key (tenant_id, subject_id) lists both columns: the tenant's id is not a reference to the row.
        for t, col in [(t, c) for t, c in cursor.fetchall() if c != "tenant_id"]:
            cursor.execute(f'SELECT count(*) FROM "{t}" WHERE "{col}" = %s', [pk])
            n = cursor.fetchone()[0]
            if n:
                found[f"{t}.{col}"] = n
    return found


def run_job(job_id: str) -> str:
    """Run a queued deletion job in this process (the same task function the worker runs)."""
    from memory.deletion.tasks import run_deletion

    return run_deletion(job_id)
