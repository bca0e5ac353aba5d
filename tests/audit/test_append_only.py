"""Audit records are never changed or deleted: not through the model, not through a queryset,
and on PostgreSQL not even with raw SQL. Deleting a user or a project keeps their records."""
import pytest
from django.db import DatabaseError, connection, transaction

from apps.audit.models import AppendOnlyError, AuditEvent
from apps.audit.services import audit_record

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql",
                                   reason="the trigger exists on PostgreSQL only (SQLite: the ORM guards)")


@pytest.fixture
def event(alice, project):
    return audit_record(action="membership.add", actor=alice, project=project, target=alice)


def test_a_saved_event_cannot_be_saved_again(event):
    event.action = "quota.delete"
    with pytest.raises(AppendOnlyError):
        event.save()
    assert AuditEvent.objects.get(pk=event.pk).action == "membership.add"


def test_an_event_cannot_be_deleted(event):
    with pytest.raises(AppendOnlyError):
        event.delete()
    assert AuditEvent.objects.filter(pk=event.pk).exists()


@pytest.mark.parametrize("write", [
    lambda qs: qs.update(action="quota.delete"),
    lambda qs: qs.delete(),
    lambda qs: AuditEvent.objects.bulk_update(list(qs), ["action"]),
])
def test_querysets_refuse_updates_and_deletes(event, write):
    with pytest.raises(AppendOnlyError):
        write(AuditEvent.objects.filter(pk=event.pk))
    assert AuditEvent.objects.filter(pk=event.pk, action="membership.add").exists()


@on_postgresql
@pytest.mark.parametrize("sql", [
    "UPDATE audit_auditevent SET action = 'quota.delete' WHERE id = %s",
    "UPDATE audit_auditevent SET details = '{\"role\": \"owner\"}'::jsonb WHERE id = %s",
    "UPDATE audit_auditevent SET action = action WHERE id = %s",  # even a no-op
    "UPDATE audit_auditevent SET actor_id = NULL, actor_username = '' WHERE id = %s",
    "DELETE FROM audit_auditevent WHERE id = %s",
])
def test_the_database_refuses_raw_updates_and_deletes(event, sql):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [event.pk])
    assert AuditEvent.objects.filter(pk=event.pk, action="membership.add", actor_username="alice").exists()


def test_deleting_the_actor_keeps_the_record_and_the_name(event, alice):
    alice.delete()
    event.refresh_from_db()
    assert event.actor is None and event.actor_username == "alice"


def test_deleting_the_project_keeps_the_record_and_the_slug(event, project):
    project.delete()
    event.refresh_from_db()
    assert event.project is None and event.project_slug == "vision"


def test_secrets_passed_by_mistake_are_redacted(alice):
    event = audit_record(action="token.create", actor=alice,
                         details={"token": "cairn_x_y", "password": "p", "nested": {"kubeconfig": "k"}, "name": "n"})
    assert event.details == {"token": "[redacted]", "password": "[redacted]", "nested": {"kubeconfig": "[redacted]"},
                             "name": "n"}
