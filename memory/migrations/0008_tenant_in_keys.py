"""Tenant in every key of the memory tables (the distribution column of a tenant-sharded database:
memory/sharding.py, docs/scaling.md), first part.

- The links of ``Subject.users`` and ``Conflict.records`` become explicit models (SubjectUser, ConflictRecord) on
  the same tables, with a ``tenant`` copied from the subject or the conflict: added nullable, filled from the
  parent row, then made NOT NULL; their unique pair becomes (a, b, tenant).
- Audit rows all have a tenant. The system sweeps now write one row per tenant they touched
  (memory/deletion/retention.py, memory/threads/services/retention.py). Rows written before without a tenant:
  a TTL expiry's row is split into one row per tenant of the records it names (the records are still there);
  the others (thread retention sweeps) name only rows already deleted, so no tenant can be found for them, and
  they are dropped.
- Foreign keys between distributed tables leave Django's hands (``db_constraint=False``: Django drops its
  single-column constraints here); 0009_composite_keys writes them back as composite keys with tenant_id.

The deferred foreign-key checks run at once (SET CONSTRAINTS ALL IMMEDIATE) so the ALTERs that follow each
UPDATE have no pending trigger events.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from memory.tenant_links import tenant_link

SYSTEM_AUDIT = """
SET CONSTRAINTS ALL IMMEDIATE;
INSERT INTO memory_auditentry (tenant_id, subject_id, actor, action, object_type, object_id, data, created_at)
SELECT r.tenant_id, NULL, a.actor, a.action, a.object_type, a.object_id,
       jsonb_set(a.data, '{memory_ids}', to_jsonb(array_agg(r.id ORDER BY r.id))), a.created_at
FROM memory_auditentry a
CROSS JOIN LATERAL jsonb_array_elements_text(a.data -> 'memory_ids') m(id)
JOIN memory_memoryrecord r ON r.id = m.id
WHERE a.tenant_id IS NULL AND a.action = 'memory.expire' AND jsonb_typeof(a.data -> 'memory_ids') = 'array'
GROUP BY a.id, r.tenant_id;
DELETE FROM memory_auditentry WHERE tenant_id IS NULL;
SET CONSTRAINTS ALL DEFERRED;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0007_subject_display_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL(SYSTEM_AUDIT, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name='auditentry',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='subject',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='candidate',
            name='conflict_record',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.memoryrecord'),
        ),
        migrations.AlterField(
            model_name='candidate',
            name='merged_into',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.candidate'),
        ),
        migrations.AlterField(
            model_name='candidate',
            name='result_record',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.memoryrecord'),
        ),
        migrations.AlterField(
            model_name='candidate',
            name='source_event',
            field=models.ForeignKey(db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='candidates', to='memory.event'),
        ),
        migrations.AlterField(
            model_name='candidate',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='candidates', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='conflict',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='conflicts', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='event',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='memoryrecord',
            name='source_event',
            field=models.ForeignKey(db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='records', to='memory.event'),
        ),
        migrations.AlterField(
            model_name='memoryrecord',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='records', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='memoryrecord',
            name='superseded_by',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.memoryrecord'),
        ),
        migrations.AlterField(
            model_name='memoryrecord',
            name='supersedes',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.memoryrecord'),
        ),
        *tenant_link(
            'SubjectUser', 'memory_subject_users',
            (('subject', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                           to='memory.subject')),
             ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                        to=settings.AUTH_USER_MODEL))),
            ('subject', 'users', models.ManyToManyField(blank=True, related_name='subjects',
                                                        through='memory.SubjectUser', to=settings.AUTH_USER_MODEL)),
            tenant_from=('subject', 'memory_subject'), unique='subject_user_unique', distributed=('subject',)),
        *tenant_link(
            'ConflictRecord', 'memory_conflict_records',
            (('conflict', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                            to='memory.conflict')),
             ('memoryrecord', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                                to='memory.memoryrecord'))),
            ('conflict', 'records', models.ManyToManyField(related_name='conflicts', through='memory.ConflictRecord',
                                                           to='memory.memoryrecord')),
            tenant_from=('conflict', 'memory_conflict'), unique='conflict_record_unique',
            distributed=('conflict', 'memoryrecord')),
    ]
