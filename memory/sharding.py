"""How each table is placed on a tenant-sharded PostgreSQL (Citus), and the rules the schema meets there.

Citus distributes a table by one column and keeps every row with the same value on one node. It then asks:

- a distributed table carries the distribution column (here ``tenant_id``, NOT NULL: a row with NULL
  has no node);
- every primary key and unique constraint of a distributed table includes it (uniqueness is checked on one
  node only);
- every foreign key between distributed tables includes it on both sides (both rows on one node), and so
  does every join, or each side of the join is filtered by the same tenant (a query Citus routes to one node);
- a reference table (copied to every node) never points at a distributed one;
- a local table (the coordinator's own) is never pointed at by a distributed or reference table.

``PLACEMENT`` names the place of every table the migrations create; ``tests/test_sharding.py`` reads
PostgreSQL's catalog on the migrated schema and fails on a table missing here, or on any breach of the
rules above (``RULES``). The schema meets them all: composite primary and foreign keys with tenant_id
(``memory/migrations/0009_composite_keys.py``), explicit link models with a tenant for the many-to-many fields.
docs/scaling.md gives the steps on Citus.
"""

from __future__ import annotations

from typing import Literal

Placement = Literal["distributed", "reference", "local"]

DISTRIBUTION_COLUMN = "tenant_id"

DISTRIBUTED: tuple[str, ...] = (
    # memory: the people and what is known about them
    "memory_subject", "memory_subject_users", "memory_event", "memory_memoryrecord", "memory_candidate",
    "memory_conflict", "memory_conflict_records", "memory_tombstone", "memory_auditentry",
    # derived read surfaces
    "retrieval_recordcontext", "retrieval_retrievallog", "retrieval_subjectindex", "retrieval_termbucket",
    "retrieval_termcount", "retrieval_pendingcontext", "retrieval_pendingmaintenance", "retrieval_subjectcentroid",
    # conversations and workflows
    "threads_thread", "threads_threadevent", "threads_summary", "threads_checkpoint", "threads_toolcall",
    # deletion
    "deletion_deletionjob", "deletion_deletionstep",
    # knowledge documents
    "knowledge_document", "knowledge_chunk", "knowledge_accessdomain_readers",
    # procedures
    "procedures_procedure", "procedures_procedureversion", "procedures_changeproposal",
    "procedures_procedure_members",
)

# Small, read on every request before the tenant is known (an agent key is looked up by its hash), or
# pointed at by distributed tables: copied to every node.
REFERENCE: tuple[str, ...] = (
    "memory_tenant", "memory_tenant_reviewers", "memory_agentkey", "memory_memoryclass", "knowledge_accessdomain",
    "auth_user", "auth_group", "auth_permission", "auth_group_permissions", "auth_user_groups",
    "auth_user_user_permissions", "django_content_type",
)

# The coordinator's own: the task broker, sessions, caches, rate-limit counters, migration history.
LOCAL: tuple[str, ...] = (
    "django_migrations", "django_session", "django_admin_log", "django_q_ormq", "django_q_schedule",
    "django_q_task", "engram_cache", "engram_coordination", "api_throttlecounter",
)

PLACEMENT: dict[str, Placement] = {
    **{t: "distributed" for t in DISTRIBUTED},
    **{t: "reference" for t in REFERENCE},
    **{t: "local" for t in LOCAL},
}

# The rules tests/test_sharding.py checks on the migrated schema, every one with no exception.
RULES: dict[str, str] = {
    "no_tenant_column": "a distributed table has a tenant_id column",
    "nullable_tenant": "its tenant_id is NOT NULL",
    "primary_key": "its primary key includes tenant_id",
    "unique": "its unique constraints and unique indexes include tenant_id",
    "foreign_key": "a foreign key between distributed tables pairs tenant_id with the parent's tenant_id",
    "reference_to_distributed": "no reference table points at a distributed one",
    "to_local": "nothing but a local table points at a local one",
}
