"""Tenant in every primary key and every foreign key between distributed tables (memory/sharding.py,
docs/scaling.md): what Citus asks of tables distributed by tenant_id.

- Primary keys become (id, tenant_id): the id first, so the key's index still serves Django's lookups by id
  (``get(pk=…)``, ``save()``, cascades) with no second index; the tenant in it, so Citus can check it on one node.
- Every foreign key between distributed tables becomes (tenant_id, x_id) onto the parent's (tenant_id, id),
  DEFERRABLE INITIALLY DEFERRED and without ON DELETE, like Django's own: a child row must have its parent's
  tenant. Django declares these fields ``db_constraint=False`` (the previous migrations of each app dropped
  Django's single-column constraints), so it never creates or drops them; the ORM still cascades by id.

Runs after every app dropped its single-column foreign keys (the dependencies), so no constraint hangs on a
primary key this replaces; reversed, the single-column keys come back before those apps restore their constraints.
"""

from django.db import migrations

# (table, primary key column): every distributed table but the term counts, whose composite key retrieval's
# 0008_tenant_in_keys extended.
PRIMARY_KEYS = [
    ('memory_subject', 'id'), ('memory_subject_users', 'id'), ('memory_event', 'id'), ('memory_memoryrecord', 'id'),
    ('memory_candidate', 'id'), ('memory_conflict', 'id'), ('memory_conflict_records', 'id'),
    ('memory_tombstone', 'id'), ('memory_auditentry', 'id'),
    ('retrieval_recordcontext', 'record_id'), ('retrieval_retrievallog', 'id'),
    ('retrieval_subjectindex', 'subject_id'), ('retrieval_termbucket', 'id'), ('retrieval_pendingcontext', 'record_id'),
    ('threads_thread', 'id'), ('threads_threadevent', 'id'), ('threads_summary', 'id'), ('threads_checkpoint', 'id'),
    ('threads_toolcall', 'id'),
    ('deletion_deletionjob', 'id'), ('deletion_deletionstep', 'id'),
    ('knowledge_document', 'id'), ('knowledge_chunk', 'id'), ('knowledge_accessdomain_readers', 'id'),
    ('procedures_procedure', 'id'), ('procedures_procedureversion', 'id'), ('procedures_changeproposal', 'id'),
    ('procedures_procedure_members', 'id'),
]

# (table, column, parent table): every foreign key between distributed tables; the parent's key column is id.
FOREIGN_KEYS = [
    ('memory_subject_users', 'subject_id', 'memory_subject'),
    ('memory_event', 'subject_id', 'memory_subject'),
    ('memory_memoryrecord', 'subject_id', 'memory_subject'),
    ('memory_memoryrecord', 'source_event_id', 'memory_event'),
    ('memory_memoryrecord', 'supersedes_id', 'memory_memoryrecord'),
    ('memory_memoryrecord', 'superseded_by_id', 'memory_memoryrecord'),
    ('memory_candidate', 'subject_id', 'memory_subject'),
    ('memory_candidate', 'source_event_id', 'memory_event'),
    ('memory_candidate', 'conflict_record_id', 'memory_memoryrecord'),
    ('memory_candidate', 'merged_into_id', 'memory_candidate'),
    ('memory_candidate', 'result_record_id', 'memory_memoryrecord'),
    ('memory_conflict', 'subject_id', 'memory_subject'),
    ('memory_conflict_records', 'conflict_id', 'memory_conflict'),
    ('memory_conflict_records', 'memoryrecord_id', 'memory_memoryrecord'),
    ('memory_auditentry', 'subject_id', 'memory_subject'),
    ('retrieval_retrievallog', 'subject_id', 'memory_subject'),
    ('retrieval_recordcontext', 'record_id', 'memory_memoryrecord'),
    ('retrieval_recordcontext', 'subject_id', 'memory_subject'),
    ('retrieval_pendingcontext', 'record_id', 'memory_memoryrecord'),
    ('retrieval_pendingcontext', 'subject_id', 'memory_subject'),
    ('retrieval_subjectindex', 'subject_id', 'memory_subject'),
    ('retrieval_termbucket', 'subject_id', 'memory_subject'),
    ('retrieval_termcount', 'bucket_id', 'retrieval_termbucket'),
    ('threads_thread', 'subject_id', 'memory_subject'),
    ('threads_threadevent', 'subject_id', 'memory_subject'),
    ('threads_threadevent', 'thread_id', 'threads_thread'),
    ('threads_threadevent', 'corrects_id', 'threads_threadevent'),
    ('threads_summary', 'subject_id', 'memory_subject'),
    ('threads_summary', 'thread_id', 'threads_thread'),
    ('threads_summary', 'replaced_by_id', 'threads_summary'),
    ('threads_summary', 'regenerates_id', 'threads_summary'),
    ('threads_checkpoint', 'subject_id', 'memory_subject'),
    ('threads_checkpoint', 'thread_id', 'threads_thread'),
    ('threads_toolcall', 'subject_id', 'memory_subject'),
    ('deletion_deletionjob', 'subject_id', 'memory_subject'),
    ('deletion_deletionstep', 'job_id', 'deletion_deletionjob'),
    ('knowledge_chunk', 'document_id', 'knowledge_document'),
    ('knowledge_accessdomain_readers', 'subject_id', 'memory_subject'),
    ('procedures_procedure_members', 'procedure_id', 'procedures_procedure'),
    ('procedures_procedure_members', 'subject_id', 'memory_subject'),
    ('procedures_procedureversion', 'procedure_id', 'procedures_procedure'),
    ('procedures_procedureversion', 'proposal_id', 'procedures_changeproposal'),
    ('procedures_changeproposal', 'procedure_id', 'procedures_procedure'),
    ('procedures_changeproposal', 'base_version_id', 'procedures_procedureversion'),
    ('procedures_changeproposal', 'proposer_subject_id', 'memory_subject'),
    ('procedures_changeproposal', 'rebased_from_id', 'procedures_changeproposal'),
]


def _primary_key(table: str, columns: str) -> str:
    return f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns});"


def _fk_name(table: str, column: str) -> str:
    return f"{table}_{column}_tenant_fk"


FORWARD = "\n".join([
    *(_primary_key(table, f"{column}, tenant_id") for table, column in PRIMARY_KEYS),
    *(f"ALTER TABLE {table} ADD CONSTRAINT {_fk_name(table, column)} FOREIGN KEY (tenant_id, {column}) "
      f"REFERENCES {parent} (tenant_id, id) DEFERRABLE INITIALLY DEFERRED;" for table, column, parent in FOREIGN_KEYS),
])

BACKWARD = "\n".join([
    *(f"ALTER TABLE {table} DROP CONSTRAINT {_fk_name(table, column)};" for table, column, _ in FOREIGN_KEYS),
    *(_primary_key(table, column) for table, column in PRIMARY_KEYS),
])


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_tenant_in_keys'),
        ('retrieval', '0008_tenant_in_keys'),
        ('threads', '0006_tenant_in_keys'),
        ('deletion', '0006_tenant_in_keys'),
        ('knowledge', '0004_tenant_in_keys'),
        ('procedures', '0004_tenant_in_keys'),
    ]

    operations = [
        migrations.RunSQL(FORWARD, reverse_sql=BACKWARD),
    ]
