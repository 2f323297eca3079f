"""Tenant in every key of the threads tables (the distribution column of a tenant-sharded database:
memory/sharding.py, docs/scaling.md), first part: foreign keys between distributed tables leave Django's hands
(``db_constraint=False``: Django drops its single-column constraints here); memory's 0009_composite_keys writes
them back as composite keys with tenant_id.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_tenant_in_keys'),
        ('threads', '0005_event_unique_tenant'),
    ]

    operations = [
        migrations.AlterField(
            model_name='checkpoint',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='checkpoint',
            name='thread',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='threads.thread'),
        ),
        migrations.AlterField(
            model_name='summary',
            name='regenerates',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='threads.summary'),
        ),
        migrations.AlterField(
            model_name='summary',
            name='replaced_by',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='threads.summary'),
        ),
        migrations.AlterField(
            model_name='summary',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='summary',
            name='thread',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='summaries', to='threads.thread'),
        ),
        migrations.AlterField(
            model_name='thread',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='threads', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='threadevent',
            name='corrects',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='threads.threadevent'),
        ),
        migrations.AlterField(
            model_name='threadevent',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='threadevent',
            name='thread',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='threads.thread'),
        ),
        migrations.AlterField(
            model_name='toolcall',
            name='subject',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.subject'),
        ),
    ]
