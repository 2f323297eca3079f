"""Every record that already has a context window gets a copy of its window's lexemes
(MemoryRecord.context_terms), as memory/retrieval/context.py writes them for new windows."""

from django.db import migrations

_COPY = """
UPDATE memory_memoryrecord r SET context_terms = rc.terms
FROM retrieval_recordcontext rc
WHERE rc.record_id = r.id AND rc.tenant_id = r.tenant_id AND r.status = 'active'
"""


def copy_terms(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_COPY)


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0011_record_context_terms'),
        ('retrieval', '0011_blend_existing_windows'),
    ]

    operations = [
        migrations.RunPython(copy_terms, migrations.RunPython.noop),
    ]
