"""How each table would be placed on a tenant-sharded PostgreSQL (Citus), and what still stands in the way.

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
rules above that is not in ``KNOWN`` (and on an entry of ``KNOWN`` that no longer breaks anything, so the
list only shrinks). docs/scaling.md gives the steps on Citus and what these exceptions cost.
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
    "retrieval_termcount", "retrieval_pendingcontext", "retrieval_pendingmaintenance",
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

# What still breaks a rule, pinned: the catalog test fails on anything outside these sets, and on any entry
# here that no longer breaks the rule. Each is explained in docs/scaling.md ("What still stands in the way").
KNOWN: dict[str, frozenset[str]] = {
    # Distributed tables without a tenant_id column: Django's implicit many-to-many tables and
    # child rows reached through a parent.
    "no_tenant_column": frozenset({
        "memory_subject_users", "memory_conflict_records", "knowledge_accessdomain_readers",
        "procedures_procedure_members", "retrieval_termcount",
    }),
    # tenant_id nullable: system audit rows (a retention sweep across tenants) have no tenant.
    "nullable_tenant": frozenset({"memory_auditentry"}),
    # Primary keys without tenant_id: Django models have a single-column primary key, and other tables'
    # foreign keys point at it (Django 5.2's CompositePrimaryKey cannot be the target of a ForeignKey).
    "primary_key": frozenset({
        "memory_subject", "memory_subject_users", "memory_event", "memory_memoryrecord", "memory_candidate",
        "memory_conflict", "memory_conflict_records", "memory_tombstone", "memory_auditentry",
        "retrieval_recordcontext", "retrieval_retrievallog", "retrieval_subjectindex", "retrieval_termbucket",
        "retrieval_termcount", "threads_thread", "threads_threadevent", "threads_summary", "threads_checkpoint",
        "threads_toolcall", "deletion_deletionjob", "deletion_deletionstep", "knowledge_document",
        "retrieval_pendingcontext", "retrieval_pendingmaintenance",
        "knowledge_chunk", "knowledge_accessdomain_readers", "procedures_procedure",
        "procedures_procedureversion", "procedures_changeproposal", "procedures_procedure_members",
    }),
    # Unique constraints and unique indexes (by name) of distributed tables without tenant_id.
    "unique": frozenset({
        "memory_subject_users_subject_id_user_id_bc555969_uniq",
        "memory_conflict_records_conflict_id_memoryrecord_271b5413_uniq",
        "knowledge_accessdomain_r_accessdomain_id_subject__da035e9c_uniq",
        "procedures_procedure_mem_procedure_id_subject_id_c5a77ae1_uniq",
        "procedures_procedureversion_proposal_id_key",
    }),
    # Foreign keys between distributed tables on one column (``table.column``): Citus needs tenant_id on
    # both sides.
    "foreign_key": frozenset({
        "deletion_deletionjob.subject_id", "deletion_deletionstep.job_id",
        "knowledge_accessdomain_readers.subject_id", "knowledge_chunk.document_id",
        "memory_auditentry.subject_id", "memory_candidate.conflict_record_id", "memory_candidate.merged_into_id",
        "memory_candidate.result_record_id", "memory_candidate.source_event_id", "memory_candidate.subject_id",
        "memory_conflict.subject_id", "memory_conflict_records.conflict_id",
        "memory_conflict_records.memoryrecord_id", "memory_event.subject_id",
        "memory_memoryrecord.source_event_id", "memory_memoryrecord.subject_id",
        "memory_memoryrecord.superseded_by_id", "memory_memoryrecord.supersedes_id",
        "memory_subject_users.subject_id", "procedures_changeproposal.base_version_id",
        "procedures_changeproposal.procedure_id", "procedures_changeproposal.proposer_subject_id",
        "procedures_changeproposal.rebased_from_id", "procedures_procedure_members.procedure_id",
        "procedures_procedure_members.subject_id", "procedures_procedureversion.procedure_id",
        "procedures_procedureversion.proposal_id", "retrieval_pendingcontext.record_id",
        "retrieval_pendingcontext.subject_id",
        "retrieval_pendingmaintenance.subject_id", "retrieval_recordcontext.record_id",
        "retrieval_recordcontext.subject_id", "retrieval_retrievallog.subject_id",
        "retrieval_subjectindex.subject_id", "retrieval_termbucket.subject_id", "retrieval_termcount.bucket_id",
        "threads_checkpoint.subject_id", "threads_checkpoint.thread_id", "threads_summary.regenerates_id",
        "threads_summary.replaced_by_id", "threads_summary.subject_id", "threads_summary.thread_id",
        "threads_thread.subject_id", "threads_threadevent.corrects_id", "threads_threadevent.subject_id",
        "threads_threadevent.thread_id", "threads_toolcall.subject_id",
    }),
    # Reference tables pointing at distributed ones, and anything pointing at a local table.
    "reference_to_distributed": frozenset(),
    "to_local": frozenset(),
}
