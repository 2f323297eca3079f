"""Migration operations that turn Django's implicit many-to-many table into an explicit link model carrying the
tenant (the distribution column of a tenant-sharded database: memory/sharding.py, docs/scaling.md).

Used by the migrations that made the links of subjects' users, conflicts' records, access domains' readers and
procedures' members explicit. The table keeps its name, its rows and its ids; only the state moves, then the
tenant column is added, filled from the parent row, made NOT NULL and put in the unique pair.
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models
from django.db.migrations.operations.base import Operation


def fill(table: str, parent: str, column: str) -> str:
    return (f"SET CONSTRAINTS ALL IMMEDIATE; UPDATE {table} x SET tenant_id = p.tenant_id FROM {parent} p "
            f"WHERE p.id = x.{column}; SET CONSTRAINTS ALL DEFERRED;")


def tenant_link(model: str, table: str, links: tuple[tuple[str, models.ForeignKey], tuple[str, models.ForeignKey]],
                m2m: tuple[str, str, models.ManyToManyField], tenant_from: tuple[str, str], unique: str,
                distributed: tuple[str, ...]) -> list[Operation]:
    """``table``, Django's implicit table of the many-to-many field ``m2m`` (model, name, new field), becomes the
    explicit model ``model``. ``links`` are its two foreign keys as Django made them, in the table's order;
    ``tenant_from`` the link (and its table) whose row gives the tenant; ``distributed`` the links onto
    distributed tables, whose constraints leave Django's hands (memory/migrations/0009_composite_keys.py)."""
    lower = model.lower()
    (first, _), (second, _) = links
    operations: list[Operation] = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name=model,
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                               verbose_name='ID')),
                    *links,
                ],
                options={'db_table': table, 'unique_together': {(first, second)}},
            ),
            migrations.AlterField(model_name=m2m[0], name=m2m[1], field=m2m[2]),
        ]),
        migrations.AddField(
            model_name=lower, name='tenant',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                    to='memory.tenant'),
        ),
        migrations.RunSQL(fill(table, tenant_from[1], f"{tenant_from[0]}_id"), reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name=lower, name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='memory.tenant'),
        ),
        migrations.AlterUniqueTogether(name=lower, unique_together=set()),
        migrations.AddConstraint(
            model_name=lower, constraint=models.UniqueConstraint(fields=(first, second, 'tenant'), name=unique),
        ),
    ]
    for name, field in links:
        if name in distributed:
            _, _, args, kwargs = field.deconstruct()
            operations.append(migrations.AlterField(
                model_name=lower, name=name, field=models.ForeignKey(*args, **{**kwargs, 'db_constraint': False})))
    return operations
