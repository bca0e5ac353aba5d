from django.contrib import admin

from apps.core.admin import ReadOnlyAdmin

from .models import TelemetrySample


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(ReadOnlyAdmin):
    list_display = ["time", "node", "gpu", "workload_id", "metric", "value"]
    list_filter = ["metric"]
    search_fields = ["node"]
    show_full_result_count = False
