"""Tenant in every key of the retrieval tables (the distribution column of a tenant-sharded database:
memory/sharding.py, docs/scaling.md), first part.

- A term count carries its bucket's tenant (added nullable, filled from the bucket, then NOT NULL), and its
  primary key becomes (bucket_id, lexeme, tenant_id): appended last, so the key still serves the lookups by
  bucket and lexeme.
- Foreign keys onto distributed tables leave Django's hands (``db_constraint=False``: Django drops its
  single-column constraints here); memory's 0009_composite_keys writes them back as composite keys.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_tenant_in_keys'),
        ('retrieval', '0007_log_quotes'),
    ]

    operations = [
        migrations.AddField(
            model_name='termcount',
            name='tenant',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE; UPDATE retrieval_termcount c SET tenant_id = b.tenant_id "
            "FROM retrieval_termbucket b WHERE b.id = c.bucket_id; SET CONSTRAINTS ALL DEFERRED;",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='termcount',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        # Django does not migrate a composite primary key: the state names the new column, the SQL moves the key.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='termcount',
                    name='pk',
                    field=models.CompositePrimaryKey('bucket', 'lexeme', 'tenant', blank=True, editable=False,
                                                     primary_key=True, serialize=False),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE retrieval_termcount DROP CONSTRAINT retrieval_termcount_pkey, "
                    "ADD CONSTRAINT retrieval_termcount_pkey PRIMARY KEY (bucket_id, lexeme, tenant_id)",
                    reverse_sql="ALTER TABLE retrieval_termcount DROP CONSTRAINT retrieval_termcount_pkey, "
                    "ADD CONSTRAINT retrieval_termcount_pkey PRIMARY KEY (bucket_id, lexeme)",
                ),
            ],
        ),
        migrations.AlterField(
            model_name='pendingcontext',
            name='record',
            field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='memory.memoryrecord'),
        ),
        migrations.AlterField(
            model_name='pendingcontext',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='recordcontext',
            name='record',
            field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='memory.memoryrecord'),
        ),
        migrations.AlterField(
            model_name='recordcontext',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='retrievallog',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='retrieval_logs', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='subjectindex',
            name='subject',
            field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='termbucket',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='termcount',
            name='bucket',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='retrieval.termbucket'),
        ),
    ]
