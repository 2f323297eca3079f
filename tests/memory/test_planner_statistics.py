"""A table an import fills before autovacuum has analysed it gets statistics from the worker that follows the write,
and with them the write's foreign-key checks find a row by its id instead of reading the whole tenant."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from memory.db.statistics import analyse_written_tables, stale_tables, tables_without_statistics

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_table():
    """A copy of the events table (its columns and indexes: the primary key (id, tenant_id) and the indexes led by
    tenant_id), filled with one tenant's rows and never analysed."""
    name = f"fresh_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {name} (LIKE memory_event INCLUDING ALL) WITH (autovacuum_enabled = off)")
        cursor.execute(
            f"INSERT INTO {name} (id, tenant_id, subject_id, external_id, source_type, payload_hash, text, "
            f"created_at, actor) SELECT 'evt_' || g, 1, 1, 'turn_' || g, 'explicit_user_statement', md5(g::text), "
            f"repeat(md5(g::text), 8), now(), 'agent' FROM generate_series(1, 500) g")
    return name


def key_check_plan(table: str) -> str:
    """The plan of the check PostgreSQL runs for a foreign key pointing at ``table``, as a kept (generic) plan."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE key_check (bigint, text) AS "
                       f"SELECT 1 FROM ONLY {table} x WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE OF x")
        try:
            cursor.execute("EXPLAIN EXECUTE key_check (1, 'evt_42')")
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE key_check")


def test_a_filled_table_without_statistics_is_analysed_once_and_its_key_checks_find_a_row_by_its_id(fresh_table):
    assert tables_without_statistics((fresh_table,)) == [fresh_table]

    assert analyse_written_tables((fresh_table,)) == [fresh_table]

    assert tables_without_statistics((fresh_table,)) == []
    plan = key_check_plan(fresh_table)
    # The index is searched by the id (the primary key, or the id's own pattern index): one row, not the tenant's.
    index_condition = next(line for line in plan.splitlines() if "Index Cond:" in line)
    assert "id)::text = $2" in index_condition, plan
    assert analyse_written_tables((fresh_table,)) == []  # known now: not looked at again


def test_an_empty_table_is_left_alone_until_it_holds_rows():
    name = f"empty_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {name} (id text, tenant_id bigint, PRIMARY KEY (id, tenant_id))")

    assert analyse_written_tables((name,)) == []

    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {name} VALUES ('mem_1', 1)")
    assert analyse_written_tables((name,)) == [name]


def test_a_table_is_stale_until_analysed_and_again_once_a_written_share_outgrows_what_it_counted(fresh_table):
    assert stale_tables((fresh_table,)) == [fresh_table]  # never analysed

    assert analyse_written_tables((fresh_table,)) == [fresh_table]

    assert stale_tables((fresh_table,)) == []
    assert stale_tables((fresh_table,), rows_written=50) == []  # a tenth of the 500 rows it counted
    assert stale_tables((fresh_table,), rows_written=51) == [fresh_table]
