"""Admin for workloads: look, re-prioritise, stop. Status is written only by workload_transition."""
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.core.admin import ServiceDeleteMixin, cores, gpus, memory
from apps.core.errors import ServiceError

from .choices import TERMINAL
from .deadlines import format_duration
from .models import Workload, WorkloadEvent
from .runtime import Runtime
from .services import workload_delete, workload_stop

# What of Workload.runtime (the backend's private bookkeeping) staff see in the admin. A list of
# what may be shown, not of what may not: a key a backend adds later (a token, a key, pids,
# ports) stays out until someone decides it is safe. The API shows none of it.
RUNTIME_ADMIN_KEYS = ("backend", "attempt", "alive", "ignored_env", "namespace", "job")


def public_runtime(runtime) -> dict:
    """The part of Workload.runtime staff may see: no credential, no address."""
    return Runtime.from_json(runtime).only(RUNTIME_ADMIN_KEYS)


class WorkloadEventInline(admin.TabularInline):
    model = WorkloadEvent
    fields = ["created_at", "type", "reason", "from_status", "to_status", "message"]
    readonly_fields = fields
    ordering = ["created_at", "id"]
    extra = 0
    can_delete = False
    classes = ["collapse"]

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Workload)
class WorkloadAdmin(ServiceDeleteMixin, admin.ModelAdmin):
    """Workloads are submitted through the API (which validates the spec), never added here."""

    list_display = ["name", "project", "kind", "status", "priority", "pool", "replicas", "per_replica", "runtime_limit",
                    "created_at"]
    list_filter = ["status", "waiting_on", "kind", "priority", "pool", "project"]
    list_select_related = ["project", "pool"]
    search_fields = ["name", "project__slug", "project__name"]
    date_hierarchy = "created_at"
    actions = ["stop"]
    inlines = [WorkloadEventInline]
    # What staff may change: scheduling knobs that take effect at the next scheduling cycle.
    # Not max_runtime_seconds: a launched Kubernetes Job already carries it as its deadline.
    editable = ["priority", "preemptible", "max_restarts"]
    status_fields = ["status", "status_reason", "status_message", "pending_reason", "waiting_on", "exit_code", "conditions",
                     "placement", "attempt", "public_runtime", "created_at", "updated_at", "admitted_at", "started_at",
                     "finished_at", "stop_requested_at", "stop_cause", "preempted_by", "term_sent_at", "kill_sent_at"]
    fieldsets = [
        (None, {"fields": ["project", "name", "kind", "pool", "created_by"]}),
        ("Scheduling", {"fields": ["priority", "preemptible", "max_restarts", "max_runtime_seconds", "replicas",
                                   "gpu_milli", "cpu_milli", "memory_mb", "gpu_model"]}),
        ("Status", {"fields": status_fields}),
        ("Spec", {"fields": ["spec"], "classes": ["collapse"]}),
    ]
    delete_service = staticmethod(lambda workload: workload_delete(workload=workload))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="runtime")
    def public_runtime(self, obj: Workload) -> dict:
        """The backend's runtime without credentials (a notebook's token is nobody's to read)."""
        return public_runtime(obj.runtime)

    def get_readonly_fields(self, request: HttpRequest, obj: Workload | None = None) -> list[str]:
        fields = [f.name for f in Workload._meta.fields if f.name not in self.editable and f.name != "id"]
        return [*fields, "public_runtime"]

    def save_model(self, request: HttpRequest, obj: Workload, form, change: bool) -> None:
        # Write only the knobs that changed: a full save() could put back a status that the
        # scheduler or reconciler changed while the form was open.
        changed = {name: getattr(obj, name) for name in form.changed_data if name in self.editable}
        if changed:
            Workload.objects.filter(pk=obj.pk).update(**changed, updated_at=timezone.now())

    @admin.display(description="per replica")
    def per_replica(self, obj: Workload) -> str:
        parts = [f"{gpus(obj.gpu_milli)} GPU"] if obj.gpu_milli else []
        parts += [f"{cores(obj.cpu_milli)} CPU", memory(obj.memory_mb)]
        return " · ".join(parts)

    @admin.display(description="run-time limit", ordering="max_runtime_seconds")
    def runtime_limit(self, obj: Workload) -> str:
        return format_duration(obj.max_runtime_seconds) if obj.max_runtime_seconds else "—"

    @admin.action(description="Stop selected workloads", permissions=["change"])
    def stop(self, request: HttpRequest, queryset: QuerySet[Workload]) -> None:
        stopped, skipped = 0, []
        for workload in queryset.exclude(status__in=TERMINAL):
            try:
                workload_stop(workload=workload, user=request.user, reason="StoppedByAdmin")
            except ServiceError as exc:
                skipped.append(f"{workload}: {exc.detail}")
            else:
                stopped += 1
        self.message_user(request, f"Stop requested for {stopped} workload(s).", messages.SUCCESS)
        for line in skipped:
            self.message_user(request, f"Not stopped: {line}", messages.WARNING)
