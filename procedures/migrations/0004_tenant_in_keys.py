"""Tenant in every key of the procedures tables (the distribution column of a tenant-sharded database:
memory/sharding.py, docs/scaling.md), first part.

- The members of a procedure become an explicit model (ProcedureMember) on the same table, with the procedure's
  tenant: filled from the procedure, NOT NULL, and in the unique pair.
- A version's proposal is a foreign key with a unique (proposal, tenant) instead of a one-to-one field (whose
  unique was on the proposal alone); nothing read the reverse side of the one-to-one.
- Foreign keys between distributed tables leave Django's hands (``db_constraint=False``: Django drops its
  single-column constraints here); memory's 0009_composite_keys writes them back as composite keys.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from memory.tenant_links import tenant_link


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_tenant_in_keys'),
        ('procedures', '0003_version_tenant'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name='changeproposal',
            name='base_version',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.PROTECT, related_name='proposals', to='procedures.procedureversion'),
        ),
        migrations.AlterField(
            model_name='changeproposal',
            name='procedure',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='proposals', to='procedures.procedure'),
        ),
        migrations.AlterField(
            model_name='changeproposal',
            name='proposer_subject',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.subject'),
        ),
        migrations.AlterField(
            model_name='changeproposal',
            name='rebased_from',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='rebased_into', to='procedures.changeproposal'),
        ),
        migrations.AlterField(
            model_name='procedureversion',
            name='procedure',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='procedures.procedure'),
        ),
        migrations.AlterField(
            model_name='procedureversion',
            name='proposal',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='The proposal it was published from, if any.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='procedures.changeproposal'),
        ),
        migrations.AddConstraint(
            model_name='procedureversion',
            constraint=models.UniqueConstraint(fields=('proposal', 'tenant'), name='procedureversion_unique_proposal'),
        ),
        *tenant_link(
            'ProcedureMember', 'procedures_procedure_members',
            (('procedure', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                             to='procedures.procedure')),
             ('subject', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                           to='memory.subject'))),
            ('procedure', 'members', models.ManyToManyField(blank=True, help_text='Subjects that may read a project procedure.', related_name='procedures', through='procedures.ProcedureMember', to='memory.subject')),
            tenant_from=('procedure', 'procedures_procedure'), unique='procedure_member_unique',
            distributed=('procedure', 'subject')),
    ]
