"""The "coordination" cache table (rate-limit counters, worker heartbeats) created by ``migrate`` itself.

``createcachetable`` creates the table of every database cache in CACHES and skips those that exist, so a
deployment that only runs ``migrate`` has it; reversing leaves the table (it holds nothing durable).
"""

from django.core.management import call_command
from django.db import migrations


def create_cache_tables(apps, schema_editor):  # type: ignore[no-untyped-def]
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies: list[tuple[str, str]] = []

    operations = [migrations.RunPython(create_cache_tables, migrations.RunPython.noop, elidable=True)]
