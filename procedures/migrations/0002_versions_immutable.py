"""The database refuses every UPDATE of a procedure version: immutability is not only a convention.

Nothing in Engram updates a version (there is no service for it and the admin is read-only); this
trigger makes sure no raw query, shell session or future bug can either.
"""

from django.db import migrations

SQL = """
CREATE OR REPLACE FUNCTION procedures_version_immutable() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'procedure versions are immutable (version id %)', OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER procedures_version_no_update BEFORE UPDATE ON procedures_procedureversion
    FOR EACH ROW EXECUTE FUNCTION procedures_version_immutable();
"""

REVERSE = """
DROP TRIGGER IF EXISTS procedures_version_no_update ON procedures_procedureversion;
DROP FUNCTION IF EXISTS procedures_version_immutable();
"""


class Migration(migrations.Migration):
    dependencies = [("procedures", "0001_initial")]

    operations = [migrations.RunSQL(SQL, REVERSE)]
