"""Every record that already has a context window gets its blended vector (MemoryRecord.blended_embedding), the same
that memory/retrieval/context.py derives for new windows. A large subject's graph over it is built by the subject
index maintenance, which finds the subject's earlier two graphs out of date and replaces them."""

from django.conf import settings
from django.db import migrations

_BLEND = """
UPDATE memory_memoryrecord r SET blended_embedding =
    r.embedding * array_fill((%(own)s / vector_norm(r.embedding))::real, ARRAY[vector_dims(r.embedding)])::vector
    + rc.embedding * array_fill(((1 - %(own)s) / vector_norm(rc.embedding))::real,
                                ARRAY[vector_dims(rc.embedding)])::vector
FROM retrieval_recordcontext rc
WHERE rc.record_id = r.id AND rc.tenant_id = r.tenant_id AND r.embedding IS NOT NULL AND rc.embedding IS NOT NULL
"""


def blend(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(_BLEND, {"own": float(settings.ENGRAM_RECALL["own_weight"])})


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0010_record_blended_embedding'),
        ('retrieval', '0010_subject_centroid'),
    ]

    operations = [
        migrations.RunPython(blend, migrations.RunPython.noop),
    ]
