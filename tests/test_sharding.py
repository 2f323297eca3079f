"""The migrated schema against the rules of a tenant-sharded PostgreSQL (Citus), read from PostgreSQL's catalog.

memory/sharding.py places every table (distributed by tenant_id, reference, local) and names the rules;
docs/scaling.md explains both. A new table, a new key, a new unique constraint or a new foreign key that breaks
a rule fails here: there is no exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from memory.sharding import DISTRIBUTED, DISTRIBUTION_COLUMN, PLACEMENT, RULES

pytestmark = pytest.mark.django_db

TENANT = DISTRIBUTION_COLUMN


def _rows(sql: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


def _catalog() -> dict[str, Any]:
    tables = {t for (t,) in _rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    tenant_nullable = dict(_rows(
        f"SELECT table_name, is_nullable = 'YES' FROM information_schema.columns "
        f"WHERE table_schema = 'public' AND column_name = '{TENANT}'"))
    # Every unique index: primary keys, unique constraints and partial unique indexes alike.
    uniques = _rows("""
        SELECT t.relname, i.relname, x.indisprimary,
               array(SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a
                     ON a.attrelid = t.oid AND a.attnum = k)::text[]
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = 'public' AND x.indisunique""")
    foreign_keys = _rows("""
        SELECT src.relname, dst.relname,
               array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a
                     ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i)::text[],
               array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a
                     ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)::text[]
        FROM pg_constraint c JOIN pg_class src ON src.oid = c.conrelid JOIN pg_class dst ON dst.oid = c.confrelid
        JOIN pg_namespace n ON n.oid = src.relnamespace
        WHERE n.nspname = 'public' AND c.contype = 'f'""")
    return {"tables": tables, "tenant_nullable": tenant_nullable, "uniques": uniques, "foreign_keys": foreign_keys}


def _breaches(catalog: dict[str, Any]) -> dict[str, set[str]]:
    distributed = {t for t, p in PLACEMENT.items() if p == "distributed"}
    found: dict[str, set[str]] = {rule: set() for rule in RULES}
    for table in sorted(catalog["tables"] & distributed):
        if table not in catalog["tenant_nullable"]:
            found["no_tenant_column"].add(table)
        elif catalog["tenant_nullable"][table]:
            found["nullable_tenant"].add(table)
    for table, index, primary, columns in catalog["uniques"]:
        if table in distributed and TENANT not in columns:
            found["primary_key"].add(table) if primary else found["unique"].add(index)
    for source, target, columns, referenced in catalog["foreign_keys"]:
        name = f"{source}.{','.join(columns)}"
        placed = PLACEMENT.get(source), PLACEMENT.get(target)
        # Both rows on one node: the child's tenant_id is the parent's tenant_id, column for column.
        if placed == ("distributed", "distributed") and (TENANT, TENANT) not in zip(columns, referenced, strict=True):
            found["foreign_key"].add(name)
        elif placed == ("reference", "distributed"):
            found["reference_to_distributed"].add(name)
        elif placed[1] == "local" and placed[0] != "local":
            found["to_local"].add(name)
    return found


def test_it_places_every_table_of_the_migrated_schema() -> None:
    tables = _catalog()["tables"]

    assert sorted(tables - set(PLACEMENT)) == [], "place the new table in memory/sharding.py"
    assert sorted(set(PLACEMENT) - tables) == [], "memory/sharding.py names a table the migrations do not create"


def test_the_distribution_commands_in_the_scaling_guide_name_every_distributed_table() -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "scaling.md").read_text()
    commands = guide[guide.index("create_distributed_table"):]

    assert [t for t in DISTRIBUTED if f"'{t}'" not in commands] == []


@pytest.mark.parametrize("rule", sorted(RULES))
def test_it_breaks_no_sharding_rule(rule: str) -> None:
    found = _breaches(_catalog())[rule]

    assert sorted(found) == [], f"{RULES[rule]} (see docs/scaling.md)"


def test_it_finds_a_breach() -> None:
    """The check itself can fail: a unique constraint without tenant_id, a reference table pointing at a
    distributed one, and foreign keys between distributed tables without the tenant or pairing it wrongly."""
    catalog = _catalog()
    catalog["uniques"].append(("memory_memoryrecord", "record_unique_text", False, ["text"]))
    catalog["uniques"].append(("memory_event", "memory_event_pkey", True, ["id"]))
    catalog["foreign_keys"].append(("memory_tenant", "memory_subject", ["owner_id"], ["id"]))
    catalog["foreign_keys"].append(("memory_event", "memory_subject", ["subject_id"], ["id"]))
    catalog["foreign_keys"].append(("memory_candidate", "memory_memoryrecord", ["tenant_id", "result_record_id"],
                                    ["id", "tenant_id"]))

    found = _breaches(catalog)

    assert found["unique"] == {"record_unique_text"}
    assert found["primary_key"] == {"memory_event"}
    assert found["reference_to_distributed"] == {"memory_tenant.owner_id"}
    assert found["foreign_key"] == {"memory_event.subject_id", "memory_candidate.tenant_id,result_record_id"}


BEFORE_TENANT_COLUMNS = [("deletion", "0003_thread_clear_kind"), ("knowledge", "0002_chunk_embedding_inline"),
                         ("procedures", "0002_versions_immutable")]


@pytest.mark.django_db(transaction=True)
def test_it_fills_the_tenant_of_steps_chunks_and_versions_written_before_the_column() -> None:
    from django.db.migrations.executor import MigrationExecutor

    from memory.identity.services import tenant_create, user_create

    MigrationExecutor(connection).migrate(BEFORE_TENANT_COLUMNS)
    tenants = [tenant_create(slug="one"), tenant_create(slug="two")]
    reviewer = user_create(tenant=tenants[0], username="rita", password="pw-rita-123", reviewer=True)
    with connection.cursor() as cursor:
        for t in tenants:
            cursor.execute(
                "INSERT INTO deletion_deletionjob (id, tenant_id, subject_hash, kind, memory_id, status, reason, "
                "requested_by, plan, markers_sealed, runs, created_at, updated_at) VALUES (%s, %s, 'h', 'memory', "
                "'', 'completed', '', 'system', '{}', '', 0, now(), now())", [f"del_{t.pk}", t.pk])
            cursor.execute("INSERT INTO deletion_deletionstep (job_id, name, position, status, attempts, rows, "
                           "last_error, updated_at) VALUES (%s, 'records', 0, 'done', 1, 0, '', now())",
                           [f"del_{t.pk}"])
            cursor.execute("INSERT INTO knowledge_accessdomain (tenant_id, name, description, all_subjects, "
                           "reader_kinds, created_at) VALUES (%s, 'd', '', true, '{}', now()) RETURNING id", [t.pk])
            domain = cursor.fetchone()[0]
            cursor.execute(
                "INSERT INTO knowledge_document (tenant_id, access_domain_id, external_id, title, uri, mime_type, "
                "content_hash, version, metadata, char_count, ingested_at, created_at) VALUES (%s, %s, 'doc', 't', "
                "'', 'text/plain', 'h', 1, '{}', 1, now(), now()) RETURNING id", [t.pk, domain])
            document = cursor.fetchone()[0]
            cursor.execute("INSERT INTO knowledge_chunk (document_id, access_domain_id, ordinal, text, char_start, "
                           "char_end, token_count) VALUES (%s, %s, 0, 'x', 0, 1, 1)", [document, domain])
            cursor.execute("INSERT INTO procedures_procedure (tenant_id, name, scope, current_number, created_at) "
                           "VALUES (%s, 'p', 'org', 1, now()) RETURNING id", [t.pk])
            procedure = cursor.fetchone()[0]
            cursor.execute("INSERT INTO procedures_procedureversion (procedure_id, number, body, change_summary, "
                           "author, approved_at, approved_by_id) VALUES (%s, 1, 'b', '', 'user:1', now(), %s)",
                           [procedure, reviewer.pk])

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    copied = _rows("""
        SELECT 'step', s.tenant_id = j.tenant_id FROM deletion_deletionstep s
            JOIN deletion_deletionjob j ON j.id = s.job_id
        UNION ALL SELECT 'chunk', c.tenant_id = d.tenant_id FROM knowledge_chunk c
            JOIN knowledge_document d ON d.id = c.document_id
        UNION ALL SELECT 'version', v.tenant_id = p.tenant_id FROM procedures_procedureversion v
            JOIN procedures_procedure p ON p.id = v.procedure_id""")
    assert sorted(copied) == sorted([(kind, True) for kind in ("step", "chunk", "version") for _ in tenants])
    # The versions' immutability trigger, set aside for the fill, is back.
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        _rows("UPDATE procedures_procedureversion SET body = 'changed' RETURNING id")


def test_the_database_refuses_a_row_whose_parent_is_of_another_tenant(agent, foreign_agent) -> None:
    """The composite foreign keys hold a child row to its parent's tenant: one node on Citus, and on one
    PostgreSQL no row that one tenant's reads could reach through another tenant's parent."""
    from django.db import IntegrityError, transaction

    from memory.models import Event

    with pytest.raises(IntegrityError, match="memory_event_subject_id_tenant_fk"), transaction.atomic():
        Event.objects.create(tenant=foreign_agent.tenant, subject=agent.subject, external_id="evt_1",
                             source_type="explicit_user_statement", payload_hash="h", actor="agent")
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


BEFORE_TENANT_KEYS = [("memory", "0007_subject_display_name")]


@pytest.mark.django_db(transaction=True)
def test_it_fills_the_tenant_of_links_term_counts_and_system_audit_rows_written_before_the_keys() -> None:
    from django.contrib.auth import get_user_model
    from django.db.migrations.executor import MigrationExecutor

    from memory.identity.services import tenant_create

    MigrationExecutor(connection).migrate(BEFORE_TENANT_KEYS)
    tenants = [tenant_create(slug="one"), tenant_create(slug="two")]
    records = []
    with connection.cursor() as cursor:
        for t in tenants:
            user = get_user_model().objects.create_user(username=f"u{t.pk}", password="pw-12345678")
            cursor.execute("INSERT INTO memory_subject (tenant_id, kind, external_id, display_name, created_at) "
                           "VALUES (%s, 'user', 'usr', '', now()) RETURNING id", [t.pk])
            subject = cursor.fetchone()[0]
            cursor.execute("INSERT INTO memory_subject_users (subject_id, user_id) VALUES (%s, %s)", [subject, user.pk])
            cursor.execute("SELECT id FROM memory_memoryclass WHERE tenant_id = %s LIMIT 1", [t.pk])
            memory_class = cursor.fetchone()[0]
            record = f"mem_{t.pk}"
            records.append(record)
            cursor.execute(
                "INSERT INTO memory_memoryrecord (id, tenant_id, subject_id, namespace, kind, memory_type, field, "
                "fact, text, source_type, confidence, sensitivity, memory_class_id, status, status_reason, "
                "valid_from, created_at, content_hash) VALUES (%s, %s, %s, 'user', 'fact', 'semantic', 'f', '{}', "
                "'t', 'explicit_user_statement', 'confirmed', 'low', %s, 'expired', '', now(), now(), 'h')",
                [record, t.pk, subject, memory_class])
            cursor.execute("INSERT INTO memory_conflict (tenant_id, subject_id, namespace, field, status, resolution, "
                           "created_at) VALUES (%s, %s, 'user', 'f', 'open', '', now()) RETURNING id", [t.pk, subject])
            cursor.execute("INSERT INTO memory_conflict_records (conflict_id, memoryrecord_id) VALUES (%s, %s)",
                           [cursor.fetchone()[0], record])
            cursor.execute("INSERT INTO retrieval_termbucket (tenant_id, subject_id, namespace, memory_class_id, "
                           "records, length) VALUES (%s, %s, 'user', %s, 1, 1) RETURNING id",
                           [t.pk, subject, memory_class])
            cursor.execute("INSERT INTO retrieval_termcount (bucket_id, lexeme, records) VALUES (%s, 'word', 1)",
                           [cursor.fetchone()[0]])
            cursor.execute("INSERT INTO knowledge_accessdomain (tenant_id, name, description, all_subjects, "
                           "reader_kinds, created_at) VALUES (%s, 'd', '', false, '{}', now()) RETURNING id", [t.pk])
            cursor.execute("INSERT INTO knowledge_accessdomain_readers (accessdomain_id, subject_id) VALUES (%s, %s)",
                           [cursor.fetchone()[0], subject])
            cursor.execute("INSERT INTO procedures_procedure (tenant_id, name, scope, current_number, created_at) "
                           "VALUES (%s, 'p', 'project', 0, now()) RETURNING id", [t.pk])
            cursor.execute("INSERT INTO procedures_procedure_members (procedure_id, subject_id) VALUES (%s, %s)",
                           [cursor.fetchone()[0], subject])
        for action, data in [("memory.expire", f'{{"memory_ids": ["{records[0]}", "{records[1]}"]}}'),
                             ("threads.retention", '{"threads": ["thr_gone"]}')]:
            cursor.execute("INSERT INTO memory_auditentry (tenant_id, actor, action, object_type, object_id, data, "
                           "created_at) VALUES (NULL, 'system', %s, 'memory', 'sweep', %s, now())", [action, data])

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    copied = _rows("""
        SELECT 'user', l.tenant_id = p.tenant_id FROM memory_subject_users l
            JOIN memory_subject p ON p.id = l.subject_id
        UNION ALL SELECT 'conflict', l.tenant_id = p.tenant_id FROM memory_conflict_records l
            JOIN memory_conflict p ON p.id = l.conflict_id
        UNION ALL SELECT 'term', l.tenant_id = p.tenant_id FROM retrieval_termcount l
            JOIN retrieval_termbucket p ON p.id = l.bucket_id
        UNION ALL SELECT 'reader', l.tenant_id = p.tenant_id FROM knowledge_accessdomain_readers l
            JOIN memory_subject p ON p.id = l.subject_id
        UNION ALL SELECT 'member', l.tenant_id = p.tenant_id FROM procedures_procedure_members l
            JOIN procedures_procedure p ON p.id = l.procedure_id""")
    kinds = ("user", "conflict", "term", "reader", "member")
    assert sorted(copied) == sorted([(kind, True) for kind in kinds for _ in tenants])
    # The expiry's row is split by tenant, each naming its own record; the thread sweep's names no tenant left.
    audit = _rows("SELECT tenant_id, action, data ->> 'memory_ids' FROM memory_auditentry "
                  "WHERE action IN ('memory.expire', 'threads.retention')")
    assert sorted(audit) == [(t.pk, "memory.expire", f'["{r}"]') for t, r in zip(tenants, records, strict=True)]
