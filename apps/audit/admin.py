"""The audit log in the admin console: staff read it, nobody adds, changes or deletes a record
(superusers included: the permissions below are refused for everyone)."""
from django.contrib import admin
from django.http import HttpRequest

from apps.core.admin import ReadOnlyAdmin

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["time", "actor_username", "action", "project_slug", "target_repr", "source_ip"]
    list_filter = ["action", "time"]
    search_fields = ["actor_username", "project_slug", "target_repr", "source_ip"]
    date_hierarchy = "time"
    fields = ["time", "actor", "actor_username", "action", "project", "project_slug", "target_type", "target_id",
              "target_repr", "source_ip", "user_agent", "details"]
    readonly_fields = fields
    list_select_related = False  # every column is text stored on the row
    show_full_result_count = False  # a long log: no second COUNT(*) per page

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def get_actions(self, request: HttpRequest) -> dict:
        return {}
