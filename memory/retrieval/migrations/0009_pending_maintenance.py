"""Subjects whose own indexes or statistics are due (memory/retrieval/subject_index.py), with the tenant in the
primary key and in the foreign key to the subject, as on every distributed table (memory/sharding.py)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0009_composite_keys'),
        ('retrieval', '0008_tenant_in_keys'),
    ]

    operations = [
        migrations.CreateModel(
            name='PendingMaintenance',
            fields=[
                ('subject', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='memory.subject')),
                ('queued_at', models.DateTimeField()),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant')),
            ],
        ),
        migrations.RunSQL(
            "ALTER TABLE retrieval_pendingmaintenance DROP CONSTRAINT retrieval_pendingmaintenance_pkey, "
            "ADD CONSTRAINT retrieval_pendingmaintenance_pkey PRIMARY KEY (subject_id, tenant_id); "
            "ALTER TABLE retrieval_pendingmaintenance ADD CONSTRAINT retrieval_pendingmaintenance_subject_id_tenant_fk "
            "FOREIGN KEY (tenant_id, subject_id) REFERENCES memory_subject (tenant_id, id) DEFERRABLE INITIALLY DEFERRED",
            reverse_sql=migrations.RunSQL.noop,  # the table itself goes with the CreateModel's reversal
        ),
    ]
