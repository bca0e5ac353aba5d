"""The audit log in the admin console: staff read it; nobody (superusers included) adds,
changes or deletes records there."""
import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from apps.audit.models import AuditEvent
from apps.audit.services import audit_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def event(alice, project):
    return audit_record(action="membership.add", actor=alice, project=project, target=alice, details={"role": "x"})


def test_superuser_sees_the_log(client, admin_user, event):
    client.force_login(admin_user)
    page = client.get(reverse("admin:audit_auditevent_changelist"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "membership.add" in html and "vision" in html
    detail = client.get(reverse("admin:audit_auditevent_change", args=[event.pk]))
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()  # a view page, not a form


def test_nobody_adds_changes_or_deletes_in_the_admin(client, admin_user, event):
    model_admin = admin.site._registry[AuditEvent]
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    assert admin_user.is_superuser
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, event)
    assert not model_admin.has_delete_permission(request, event)
    assert model_admin.get_actions(request) == {}

    client.force_login(admin_user)
    assert client.get(reverse("admin:audit_auditevent_add")).status_code == 403
    assert client.post(reverse("admin:audit_auditevent_delete", args=[event.pk]), {"post": "yes"}).status_code == 403
    client.post(reverse("admin:audit_auditevent_change", args=[event.pk]), {"action": "quota.delete"})
    event.refresh_from_db()
    assert event.action == "membership.add"
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_non_staff_cannot_open_it(client, alice, event):
    client.force_login(alice)
    response = client.get(reverse("admin:audit_auditevent_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
