"""The suite's own footing: after a transactional test the next test finds the database as migrate left it,
empty but for the content types and permissions (tests/conftest.py empties only the tables a test wrote)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test import TransactionTestCase

from tests.conftest import KEPT_TABLES, memory_body


def tables_with_rows() -> set[str]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    found = set()
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT EXISTS (SELECT FROM {connection.ops.quote_name(table)})")
            if cursor.fetchone()[0]:
                found.add(table)
    return found


@pytest.mark.django_db(transaction=True)
def test_a_transactional_tests_rows_are_gone_and_the_content_types_stay(agent: Any) -> None:
    written = agent.post("/api/v1/memories", memory_body())
    assert written.status_code == 201, written.content
    assert agent.post("/api/v1/retrieve", {"query": "aisle seat"}).status_code == 200
    # Rows that reference one another (a record, its subject, its tenant): the foreign keys hold throughout.
    assert {"memory_tenant", "memory_subject", "memory_agentkey", "memory_memoryrecord", "memory_auditentry",
            "retrieval_retrievallog"} <= tables_with_rows()

    TransactionTestCase()._fixture_teardown()  # what runs after every transactional test

    assert tables_with_rows() == KEPT_TABLES
    record_type = ContentType.objects.get(app_label="memory", model="memoryrecord")
    assert Permission.objects.filter(content_type=record_type, codename="view_memoryrecord").exists()
