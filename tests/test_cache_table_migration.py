"""``migrate`` alone leaves a working deployment: the database cache table is created by a migration."""

from __future__ import annotations

import importlib

import pytest
from django.core.cache import cache
from django.db import connection

pytestmark = pytest.mark.django_db


def test_the_migration_creates_the_cache_table_when_it_is_missing():
    migration = importlib.import_module("memory.migrations.0003_cache_table")
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE engram_cache")  # rolled back with the test's transaction
    assert "engram_cache" not in connection.introspection.table_names()

    migration.create_cache_table(None, connection.schema_editor())

    assert "engram_cache" in connection.introspection.table_names()
    cache.set("probe", "works")
    assert cache.get("probe") == "works"
