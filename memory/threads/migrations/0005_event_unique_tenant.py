"""Unique constraints that include tenant_id (last, so the index still serves lookups by its leading columns):
required of a distributed table on a tenant-sharded database (memory/sharding.py, docs/scaling.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0005_unembedded_records_index'),
        ('threads', '0004_session_support'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='threadevent',
            name='threadevent_unique_seq',
        ),
        migrations.RemoveConstraint(
            model_name='threadevent',
            name='threadevent_unique_idem',
        ),
        migrations.AddConstraint(
            model_name='threadevent',
            constraint=models.UniqueConstraint(fields=('thread', 'seq', 'tenant'), name='threadevent_unique_seq'),
        ),
        migrations.AddConstraint(
            model_name='threadevent',
            constraint=models.UniqueConstraint(condition=models.Q(('idempotency_key__isnull', False)), fields=('thread', 'idempotency_key', 'tenant'), name='threadevent_unique_idem'),
        ),
    ]
