"""Tenant in every key of the knowledge tables (the distribution column of a tenant-sharded database:
memory/sharding.py, docs/scaling.md), first part.

- The readers of an access domain become an explicit model (AccessDomainReader) on the same table, with the
  subject's tenant: filled from the subject, NOT NULL, and in the unique pair.
- Foreign keys between distributed tables leave Django's hands (``db_constraint=False``: Django drops its
  single-column constraints here); memory's 0009_composite_keys writes them back as composite keys.
"""

import django.db.models.deletion
from django.db import migrations, models

from memory.tenant_links import tenant_link


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0003_chunk_tenant'),
        ('memory', '0008_tenant_in_keys'),
    ]

    operations = [
        migrations.AlterField(
            model_name='chunk',
            name='document',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='knowledge.document'),
        ),
        *tenant_link(
            'AccessDomainReader', 'knowledge_accessdomain_readers',
            (('accessdomain', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                                to='knowledge.accessdomain')),
             ('subject', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                           to='memory.subject'))),
            ('accessdomain', 'readers', models.ManyToManyField(blank=True, related_name='access_domains',
                                                               through='knowledge.AccessDomainReader',
                                                               to='memory.subject')),
            tenant_from=('subject', 'memory_subject'), unique='accessdomain_reader_unique', distributed=('subject',)),
    ]
