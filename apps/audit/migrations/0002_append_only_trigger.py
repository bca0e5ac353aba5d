"""On PostgreSQL, the database itself refuses to change or delete audit records.

The only UPDATE let through is the one Django makes when a user or project is deleted: it
clears `actor_id` and/or `project_id` (on_delete=SET_NULL) and changes nothing else; the copied
username and slug stay. SQLite (embedded mode) gets no trigger: there the model and its
queryset refuse instead. TRUNCATE is not blocked (the test suite empties tables with it), and
the table's owner can drop the trigger: this guards against Cairn's own code and its queries,
not against someone who holds the database's keys.
"""
from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_auditevent_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND (to_jsonb(NEW) - 'actor_id' - 'project_id') = (to_jsonb(OLD) - 'actor_id' - 'project_id')
       AND (NEW.actor_id IS NULL OR NEW.actor_id = OLD.actor_id)
       AND (NEW.project_id IS NULL OR NEW.project_id = OLD.project_id)
       AND ((OLD.actor_id IS NOT NULL AND NEW.actor_id IS NULL)
            OR (OLD.project_id IS NOT NULL AND NEW.project_id IS NULL)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % on audit_auditevent refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER audit_auditevent_append_only
    BEFORE UPDATE OR DELETE ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_auditevent_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS audit_auditevent_append_only ON audit_auditevent;
DROP FUNCTION IF EXISTS audit_auditevent_append_only();
"""


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP), elidable=False)]
