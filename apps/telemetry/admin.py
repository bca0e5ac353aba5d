from django.contrib import admin

from apps.core.admin import ReadOnlyAdmin

from .models import NodeHealthEvent, TelemetrySample


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(ReadOnlyAdmin):
    list_display = ["time", "node", "gpu", "workload_id", "metric", "value"]
    list_filter = ["metric"]
    search_fields = ["node"]
    show_full_result_count = False


@admin.register(NodeHealthEvent)
class NodeHealthEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "node_name", "gpu", "reason", "message", "cordoned"]
    list_filter = ["reason", "cordoned"]
    search_fields = ["node_name", "message"]
