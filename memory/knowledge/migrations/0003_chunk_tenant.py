"""A chunk carries its document's tenant, and the unique constraints of chunks and documents include it: the
distribution column of a tenant-sharded database (memory/sharding.py, docs/scaling.md).

Added nullable, filled from the parent row, then made NOT NULL. The deferred foreign-key checks run at once
(SET CONSTRAINTS ALL IMMEDIATE) so the ALTER that follows the UPDATE has no pending trigger events.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0002_chunk_embedding_inline'),
        ('memory', '0005_unembedded_records_index'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='chunk',
            name='chunk_unique_ordinal',
        ),
        migrations.RemoveConstraint(
            model_name='document',
            name='document_unique_external_id',
        ),
        migrations.AddField(
            model_name='chunk',
            name='tenant',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE; UPDATE knowledge_chunk c SET tenant_id = d.tenant_id FROM knowledge_document d WHERE d.id = c.document_id; SET CONSTRAINTS ALL DEFERRED",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='chunk',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.AddConstraint(
            model_name='chunk',
            constraint=models.UniqueConstraint(fields=('document', 'ordinal', 'tenant'), name='chunk_unique_ordinal'),
        ),
        migrations.AddConstraint(
            model_name='document',
            constraint=models.UniqueConstraint(fields=('access_domain', 'external_id', 'tenant'), name='document_unique_external_id'),
        ),
    ]
