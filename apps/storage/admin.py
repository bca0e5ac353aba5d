from django.contrib import admin

from .models import StorageQuota, Volume


@admin.register(StorageQuota)
class StorageQuotaAdmin(admin.ModelAdmin):
    list_display = ["project", "volume_gb"]
    list_select_related = ["project"]


@admin.register(Volume)
class VolumeAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "size_gb", "created_at"]
    list_select_related = ["project"]
    readonly_fields = ["project", "name", "created_by", "created_at"]
