"""Admin for the outbox, plus helpers every app's admin uses (human units, deletes through services)."""
from collections.abc import Callable
from decimal import Decimal

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from .errors import ServiceError
from .models import OutboxMessage

# ---- human units ------------------------------------------------------------------------------


def _trim(value: Decimal | float) -> str:
    text = f"{Decimal(str(value)).quantize(Decimal('0.001')):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def gpus(milli: int | None) -> str:
    """1500 -> '1.5'; None -> 'no limit' (GPU amounts are stored in milli-GPU)."""
    return "no limit" if milli is None else _trim(Decimal(milli) / 1000)


def cores(milli: int | None) -> str:
    return "—" if milli is None else _trim(Decimal(milli) / 1000)


def memory(mb: int | None) -> str:
    """65536 -> '64 GiB', 512 -> '512 MiB'."""
    if mb is None:
        return "—"
    if mb >= 1024:
        return f"{_trim(Decimal(mb) / 1024)} GiB"
    return f"{mb} MiB"


# ---- deletes go through the app's service -----------------------------------------------------


class ServiceDeleteMixin:
    """Deletes call `delete_service(obj)` so the service's rules apply (e.g. "stop it first").

    A refused delete shows the service's message instead of a server error, and the bulk
    "delete selected" action is replaced by one that deletes what it may and reports the rest.
    """

    delete_service: Callable[[Model], None]

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        type(self).delete_service(obj)

    def delete_view(self, request: HttpRequest, object_id: str, extra_context=None) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except ServiceError as exc:
            self.message_user(request, f"Not deleted: {exc.detail}", messages.ERROR)
            opts = self.model._meta
            return HttpResponseRedirect(
                reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[unquote(object_id)])
            )

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            del actions["delete_selected"]
            if self.has_delete_permission(request):
                actions["delete_through_service"] = self.get_action("delete_through_service")
        return actions

    @admin.action(description="Delete selected %(verbose_name_plural)s", permissions=["delete"])
    def delete_through_service(self, request: HttpRequest, queryset: QuerySet) -> None:
        deleted, refused = 0, []
        for obj in queryset:
            try:
                type(self).delete_service(obj)
            except ServiceError as exc:
                refused.append(f"{obj}: {exc.detail}")
            else:
                deleted += 1
        if deleted:
            self.message_user(request, f"Deleted {deleted} {self.model._meta.verbose_name_plural}.", messages.SUCCESS)
        for line in refused:
            self.message_user(request, f"Not deleted: {line}", messages.ERROR)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by Cairn itself (ledgers, queues): staff may look, never edit."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


# ---- outbox -----------------------------------------------------------------------------------


class SentFilter(admin.SimpleListFilter):
    title = "sent"
    parameter_name = "sent"

    def lookups(self, request, model_admin):
        return [("yes", "Sent"), ("no", "Waiting")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(sent_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(sent_at__isnull=True)
        return queryset


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ["id", "topic", "created_at", "sent_at", "attempts", "short_error"]
    list_filter = [SentFilter, "topic"]
    search_fields = ["topic", "last_error"]
    date_hierarchy = "created_at"
    fields = ["topic", "payload", "created_at", "sent_at", "attempts", "last_error"]
    readonly_fields = fields

    @admin.display(description="last error")
    def short_error(self, obj: OutboxMessage) -> str:
        return obj.last_error[:80] + ("…" if len(obj.last_error) > 80 else "")
