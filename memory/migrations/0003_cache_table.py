"""The database cache table (CACHES: DatabaseCache "engram_cache") created by ``migrate`` itself.

Health's worker check, the query caches and django-q2's cluster stats live in that table, so a deployment
that only runs ``migrate`` must still have it. ``createcachetable`` is idempotent (it skips an existing
table); reversing leaves the table, which holds nothing but disposable cache entries.
"""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):  # type: ignore[no-untyped-def]
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_drop_embedding_hnsw")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop, elidable=True)]
