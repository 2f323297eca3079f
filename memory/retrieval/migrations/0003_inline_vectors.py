"""Keep the rows both legs of retrieval scan in one piece.

A record's row with its 384-d embedding (1.5 kB) and its text vector is just above PostgreSQL's default TOAST
threshold (about 2 kB), so the embedding was moved out of line: every similarity computed while scoring a subject
fetched it from the TOAST table (an index lookup and another page per row). With ``toast_tuple_target`` at its
maximum a row stays inline up to a full page. The context windows' table gets the same, and its lexemes lose their
positions (retrieval only asks whether a window holds a word). Existing rows are rewritten once so that they move
back inline; the old versions are left to autovacuum.
"""

from django.db import migrations

FORWARD = """
ALTER TABLE memory_memoryrecord SET (toast_tuple_target = 8160);
ALTER TABLE retrieval_recordcontext SET (toast_tuple_target = 8160);
UPDATE memory_memoryrecord SET embedding = embedding::real[]::vector WHERE embedding IS NOT NULL;
UPDATE retrieval_recordcontext SET embedding = embedding::real[]::vector, terms = strip(terms)
WHERE embedding IS NOT NULL OR terms IS NOT NULL;
"""

BACKWARD = """
ALTER TABLE memory_memoryrecord RESET (toast_tuple_target);
ALTER TABLE retrieval_recordcontext RESET (toast_tuple_target);
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0002_record_context")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
