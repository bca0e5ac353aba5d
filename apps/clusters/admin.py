"""Admin for clusters, resource pools and nodes: the inventory only staff admins change."""
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.admin import cores, memory

from .forms import ClusterForm
from .models import Cluster, ClusterCredential, NetworkProfile, Node, ResourcePool
from .services import node_cordon, node_uncordon


def _per(model, fk: str, aggregate) -> Coalesce:
    """An aggregate over rows of `model` whose `fk` is the outer row, as a subquery."""
    rows = model.objects.filter(**{fk: OuterRef("pk")}).order_by().values(fk)
    return Coalesce(Subquery(rows.annotate(v=aggregate).values("v")[:1], output_field=IntegerField()), Value(0))


class PoolInline(admin.TabularInline):
    model = ResourcePool
    fields = ["name", "description", "accelerator_models"]
    extra = 0
    show_change_link = True


class CredentialInline(admin.StackedInline):
    """What the stored credentials are, never what they contain (register them over the API)."""

    model = ClusterCredential
    fields = ["source", "server", "context", "checked_at", "check_ok", "check_detail", "updated_at"]
    readonly_fields = fields
    extra = 0
    can_delete = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


def _record_credentials_deleted(cluster: Cluster, credential: ClusterCredential) -> None:
    audit_record(action=AuditAction.CLUSTER_CREDENTIALS_DELETE, target=cluster,
                 details={"source": credential.source, "server": credential.server, "context": credential.context})


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm  # the config is checked by the backend's spec (apps/clusters/forms.py)
    list_display = ["name", "backend", "pool_count", "node_count", "created_at"]
    list_filter = ["backend"]
    search_fields = ["name"]
    readonly_fields = ["created_at"]
    inlines = [PoolInline, CredentialInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Cluster]:
        return super().get_queryset(request).annotate(
            pool_total=_per(ResourcePool, "cluster", Count("pk")), node_total=_per(Node, "cluster", Count("pk"))
        )

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        if formset.model is ClusterCredential:
            for credential in formset.deleted_objects:
                _record_credentials_deleted(credential.cluster, credential)

    def delete_model(self, request: HttpRequest, obj: Cluster) -> None:
        credential = ClusterCredential.objects.filter(cluster=obj).first()
        if credential is not None:  # recorded first: the cluster's deletion takes its credentials
            _record_credentials_deleted(obj, credential)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        with transaction.atomic():
            for credential in ClusterCredential.objects.filter(cluster__in=queryset).select_related("cluster"):
                _record_credentials_deleted(credential.cluster, credential)
            super().delete_queryset(request, queryset)

    @admin.display(description="pools", ordering="pool_total")
    def pool_count(self, obj: Cluster) -> int:
        return obj.pool_total

    @admin.display(description="nodes", ordering="node_total")
    def node_count(self, obj: Cluster) -> int:
        return obj.node_total


@admin.register(ResourcePool)
class ResourcePoolAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "accelerators", "node_count", "gpu_total", "allowed_dirs", "outbound_access",
                    "locality_wait_seconds", "description"]
    # Local clusters: whether workloads reach public addresses from their own network (docs/local-backend.md).
    # Delay scheduling's bound (docs/scheduling.md, "Data locality").
    list_editable = ["outbound_access", "locality_wait_seconds"]
    list_filter = ["cluster", "outbound_access"]
    list_select_related = ["cluster"]
    search_fields = ["name", "description"]
    readonly_fields = ["created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ResourcePool]:
        return super().get_queryset(request).annotate(
            node_total=_per(Node, "pool", Count("pk")), gpus=_per(Node, "pool", Sum("gpu_count"))
        )

    @admin.display(description="accelerators")
    def accelerators(self, obj: ResourcePool) -> str:
        return ", ".join(obj.accelerator_models) or "—"

    @admin.display(description="nodes", ordering="node_total")
    def node_count(self, obj: ResourcePool) -> int:
        return obj.node_total

    @admin.display(description="allowed working dirs")
    def allowed_dirs(self, obj: ResourcePool) -> str:
        return ", ".join(obj.allowed_paths or []) or "—"

    @admin.display(description="GPUs", ordering="gpus")
    def gpu_total(self, obj: ResourcePool) -> int:
        return obj.gpus


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "pool", "accelerator_type", "cpu_arch", "gpus", "gpu_model", "cpu", "mem",
                    "health", "schedulable", "last_seen_at"]
    list_filter = ["cluster", "pool", "health", "schedulable", "accelerator_type", "cpu_arch", "gpu_model"]
    list_select_related = ["cluster", "pool"]
    search_fields = ["name", "gpu_model", "topology_domain"]
    readonly_fields = ["created_at", "last_seen_at", "cordon_reason", "others_gpu_milli", "others_cpu_milli",
                       "others_memory_mb"]
    actions = ["cordon", "uncordon"]
    fieldsets = [
        (None, {"fields": ["cluster", "pool", "name", "health", "schedulable", "last_seen_at", "created_at"]}),
        ("Capacity", {"fields": [("cpu_milli_capacity", "cpu_milli_allocatable"),
                                 ("memory_mb_capacity", "memory_mb_allocatable"),
                                 ("accelerator_type", "cpu_arch"),
                                 ("gpu_count", "gpu_model", "gpu_memory_mb"),
                                 ("others_gpu_milli", "others_cpu_milli", "others_memory_mb")],
                      "description": "The others_ fields: what pods Cairn does not own (DaemonSets, other "
                                     "tenants) request on the node; Cairn's scheduler places work in the rest."}),
        ("Topology and labels", {"fields": ["topology_domain", "labels"]}),
    ]

    @admin.display(description="GPUs", ordering="gpu_count")
    def gpus(self, obj: Node) -> int:
        return obj.gpu_count

    @admin.display(description="CPU (cores)", ordering="cpu_milli_allocatable")
    def cpu(self, obj: Node) -> str:
        return f"{cores(obj.cpu_milli_allocatable)} / {cores(obj.cpu_milli_capacity)}"

    @admin.display(description="memory", ordering="memory_mb_allocatable")
    def mem(self, obj: Node) -> str:
        return memory(obj.memory_mb_allocatable)

    @admin.action(description="Cordon: stop placing new workloads on the selected nodes", permissions=["change"])
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset:
            node_cordon(node=node, reason="AdminCordon", message=f"Cordoned by {request.user} in the admin.")
        self.message_user(request, f"Cordoned {queryset.count()} node(s). Running workloads keep running.",
                          messages.SUCCESS)

    @admin.action(description="Uncordon: allow new workloads on the selected nodes", permissions=["change"])
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        for node in queryset:
            node_uncordon(node=node, message=f"Uncordoned by {request.user} in the admin.")
        self.message_user(request, f"Made {queryset.count()} node(s) schedulable.", messages.SUCCESS)


@admin.register(NetworkProfile)
class NetworkProfileAdmin(admin.ModelAdmin):
    """Fast networks for training pods (docs/kubernetes.md, "Network profiles"); checked on save
    (NetworkProfile.clean: no privileged, SYS_ADMIN or host network, ever)."""

    list_display = ["name", "pod_security_level", "runtime_class_name", "created_at"]
    search_fields = ["name", "description"]
    readonly_fields = ["created_at"]
