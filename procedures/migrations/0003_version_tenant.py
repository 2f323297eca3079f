"""A procedure version carries its procedure's tenant, and its unique number includes it: the distribution column
of a tenant-sharded database (memory/sharding.py, docs/scaling.md).

Added nullable, filled from the parent row, then made NOT NULL. The deferred foreign-key checks run at once
(SET CONSTRAINTS ALL IMMEDIATE) so the ALTER that follows the UPDATE has no pending trigger events. Versions are
immutable (the trigger of 0002_versions_immutable refuses every UPDATE); it is set aside for this one statement,
which writes the new column only, and is back before the migration commits.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

FILL = """
SET CONSTRAINTS ALL IMMEDIATE;
ALTER TABLE procedures_procedureversion DISABLE TRIGGER procedures_version_no_update;
UPDATE procedures_procedureversion v SET tenant_id = p.tenant_id FROM procedures_procedure p WHERE p.id = v.procedure_id;
ALTER TABLE procedures_procedureversion ENABLE TRIGGER procedures_version_no_update;
SET CONSTRAINTS ALL DEFERRED;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0005_unembedded_records_index'),
        ('procedures', '0002_versions_immutable'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='procedureversion',
            name='procedureversion_unique_number',
        ),
        migrations.AddField(
            model_name='procedureversion',
            name='tenant',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name='procedureversion',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.AddConstraint(
            model_name='procedureversion',
            constraint=models.UniqueConstraint(fields=('procedure', 'number', 'tenant'), name='procedureversion_unique_number'),
        ),
    ]
