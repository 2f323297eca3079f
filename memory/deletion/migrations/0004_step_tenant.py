"""A deletion step carries its job's tenant, and its unique name includes it: the distribution column of a
tenant-sharded database (memory/sharding.py, docs/scaling.md).

Added nullable, filled from the parent row, then made NOT NULL. The deferred foreign-key checks run at once
(SET CONSTRAINTS ALL IMMEDIATE) so the ALTER that follows the UPDATE has no pending trigger events.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deletion', '0003_thread_clear_kind'),
        ('memory', '0005_unembedded_records_index'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='deletionstep',
            name='deletion_step_unique_name',
        ),
        migrations.AddField(
            model_name='deletionstep',
            name='tenant',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE; UPDATE deletion_deletionstep s SET tenant_id = j.tenant_id FROM deletion_deletionjob j WHERE j.id = s.job_id; SET CONSTRAINTS ALL DEFERRED",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='deletionstep',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.AddConstraint(
            model_name='deletionstep',
            constraint=models.UniqueConstraint(fields=('job', 'name', 'tenant'), name='deletion_step_unique_name'),
        ),
    ]
