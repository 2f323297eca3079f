"""Tenant in every key of the deletion tables (the distribution column of a tenant-sharded database:
memory/sharding.py, docs/scaling.md), first part: foreign keys between distributed tables leave Django's hands
(``db_constraint=False``: Django drops its single-column constraints here); memory's 0009_composite_keys writes
them back as composite keys with tenant_id.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deletion', '0005_job_retries_and_step_timings'),
        ('memory', '0008_tenant_in_keys'),
    ]

    operations = [
        migrations.AlterField(
            model_name='deletionjob',
            name='subject',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='deletionstep',
            name='job',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='deletion.deletionjob'),
        ),
    ]
