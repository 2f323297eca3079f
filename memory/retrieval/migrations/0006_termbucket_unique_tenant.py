"""Unique constraints that include tenant_id (last, so the index still serves lookups by its leading columns):
required of a distributed table on a tenant-sharded database (memory/sharding.py, docs/scaling.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0005_unembedded_records_index'),
        ('retrieval', '0005_pending_context'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='termbucket',
            name='termbucket_unique',
        ),
        migrations.AddConstraint(
            model_name='termbucket',
            constraint=models.UniqueConstraint(fields=('subject', 'namespace', 'memory_class', 'tenant'), name='termbucket_unique'),
        ),
    ]
