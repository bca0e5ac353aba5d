from django.contrib import admin

from .models import DeploymentKey


@admin.register(DeploymentKey)
class DeploymentKeyAdmin(admin.ModelAdmin):
    """Read-only: keys are created and revoked through the API (which shows a key once and
    records both in the audit log); the secret is never stored, so never shown here."""

    list_display = ["name", "prefix", "workload", "created_by", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "workload__name", "workload__project__slug"]
    list_select_related = ["workload__project", "created_by"]
    readonly_fields = ["workload", "name", "prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    exclude = ["secret_hash"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
