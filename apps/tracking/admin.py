from django.contrib import admin

from apps.core.admin import ReadOnlyAdmin

from .models import Run


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "project", "workload", "attempt", "status", "created_at"]
    list_filter = ["status"]
    list_select_related = ["project", "workload"]
    search_fields = ["name"]
