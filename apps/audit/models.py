"""The audit log: one row per security-relevant action, written once and never changed.

Append-only at three levels: the model refuses save() of an existing row and delete(), its
queryset refuses update() and delete(), and on PostgreSQL a trigger (migration 0002) rejects
UPDATE and DELETE on the table, except the one update Django makes when a user or project is
deleted: clearing the link (the copied username and slug stay).
"""
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from .choices import AuditAction


class AppendOnlyError(RuntimeError):
    """Audit events are never changed or deleted."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("The audit log is append-only: events cannot be updated.")

    def bulk_update(self, objs, fields, batch_size=None):
        raise AppendOnlyError("The audit log is append-only: events cannot be updated.")

    def delete(self):
        raise AppendOnlyError("The audit log is append-only: events cannot be deleted.")

    def _raw_delete(self, using):
        raise AppendOnlyError("The audit log is append-only: events cannot be deleted.")


class AuditEvent(models.Model):
    time = models.DateTimeField(default=timezone.now, db_index=True)
    # Who: the user, and their username copied so the record still says who after the user is deleted.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64, choices=AuditAction.choices)
    project = models.ForeignKey("projects.Project", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    project_slug = models.CharField(max_length=40, blank=True)
    # What it was done to: e.g. ("accounts.apitoken", "12", "laptop (cairn_ab12cd34_…)").
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField("target", max_length=255, blank=True)
    # From where.
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=255, blank=True)
    # What changed (never a secret: no token value, password or credential).
    details = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [
            models.Index(fields=["project", "-time"], name="audit_project_time"),
            models.Index(fields=["action", "-time"], name="audit_action_time"),
            models.Index(fields=["actor_username", "-time"], name="audit_actor_time"),
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.actor_username or '-'} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("The audit log is append-only: events cannot be changed.")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("The audit log is append-only: events cannot be deleted.")
