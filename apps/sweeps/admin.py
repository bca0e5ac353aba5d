from django.contrib import admin

from .models import Sweep, Trial


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    """Read-only: sweeps are created through the API and driven by Cairn."""

    list_display = ["name", "project", "status", "algorithm", "objective_key", "max_trials", "max_concurrent",
                    "created_at"]
    list_filter = ["status", "algorithm"]
    list_select_related = ["project"]
    search_fields = ["name", "project__slug"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Trial)
class TrialAdmin(admin.ModelAdmin):
    list_display = ["sweep", "number", "status", "objective", "workload", "created_at"]
    list_filter = ["status"]
    list_select_related = ["sweep__project", "workload__project"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
