from decimal import Decimal

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.serializers import StrictSerializer
from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import (
    MAX_CPU_PER_REPLICA,
    MAX_GPU_PER_REPLICA,
    CommandField,
    MemoryField,
    ResourcesSerializer,
    WorkloadCreateSerializer,
    WorkloadSerializer,
)
from apps.workloads.api.workdir import WorkingDirMixin
from apps.workloads.choices import Kind, WorkloadStatus
from apps.workloads.runtime import Runtime

from ..conf import DEPLOYMENT_PORT
from ..models import KEY_PREFIX, DeploymentKey, DeploymentRevision, DeploymentScale
from ..selectors import deployment_gateway_url, model_source


class AutoscalingSerializer(StrictSerializer):
    """Cairn's autoscaler (docs/deployments.md): replicas follow the requests in flight."""

    min_replicas = serializers.IntegerField(min_value=0, max_value=64, default=1,
                                            help_text="0 scales to zero after a stable window without requests.")
    max_replicas = serializers.IntegerField(min_value=1, max_value=64)
    target_concurrency = serializers.FloatField(min_value=0.1, max_value=10000, default=10.0,
                                                help_text="Requests in flight per replica the autoscaler aims at.")
    stable_window_seconds = serializers.FloatField(min_value=6, max_value=3600, default=60.0)
    panic_window_seconds = serializers.FloatField(min_value=1, max_value=600, default=6.0)

    def validate(self, attrs):
        if attrs["min_replicas"] > attrs["max_replicas"]:
            raise serializers.ValidationError({"min_replicas": "Must not be above max_replicas."})
        if attrs["panic_window_seconds"] > attrs["stable_window_seconds"]:
            raise serializers.ValidationError({"panic_window_seconds": "Must not be longer than the stable window."})
        return attrs


class DeploymentCreateSerializer(WorkingDirMixin, IsolatedSpecMixin, WorkloadCreateSerializer):
    """A serving command run as N replicas, each listening on $PORT."""

    kind = Kind.DEPLOYMENT
    default_preemptible = False

    command = CommandField(help_text="The serving command; it must listen on the port given in $PORT "
                                     "(locally on 127.0.0.1, on Kubernetes on every address).")
    replicas = serializers.IntegerField(required=False, default=1, min_value=1, max_value=64)
    port = serializers.IntegerField(
        required=False, default=DEPLOYMENT_PORT, min_value=1, max_value=65535,
        help_text=f"Kubernetes only: the container port, also passed as $PORT (default {DEPLOYMENT_PORT}); the "
                  "Service answers on port 80. The local backend ignores it: each replica gets a free port "
                  "chosen by Cairn in $PORT. Listen on $PORT and the same command works on both.")

    readiness_path = serializers.RegexField(
        r"^/[\x21-\x7e]*$", required=False, default="/", max_length=200,
        help_text="A replica gets traffic only once an HTTP GET on this path answers with a status below 400 "
                  "(default /).")
    public = serializers.BooleanField(
        required=False, default=False,
        help_text="Anyone may call it through the gateway, without credentials. Off by default.")
    autoscaling = AutoscalingSerializer(
        required=False, help_text="Scale between min_replicas and max_replicas on the requests in flight; "
                                  "`replicas` is the count it starts with.")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        scaling = attrs.get("autoscaling")
        if scaling and not scaling["min_replicas"] <= attrs.get("replicas", 1) <= scaling["max_replicas"]:
            raise serializers.ValidationError({"replicas": "Must be within autoscaling's min_replicas and max_replicas "
                                                           "(at least 1 to start with)."})
        return attrs

    model = serializers.CharField(
        required=False, max_length=80,
        help_text="A registered model to serve, 'name@version' (or 'name@latest'): mounted read-only at /model "
                  "(docs/data.md).")

    def build_spec(self, data):
        spec = {**super().build_spec(data), "command": data["command"], "port": data["port"],
                "readiness_path": data["readiness_path"], "public": data["public"],
                **({"autoscaling": dict(data["autoscaling"])} if data.get("autoscaling") else {})}
        if data.get("model"):
            spec["model"] = data["model"]  # checked and resolved to a version at submit (apps/storage)
        return spec


class ModelSourceSerializer(serializers.Serializer):
    model = serializers.CharField()
    version = serializers.IntegerField()
    mount = serializers.CharField()
    run = serializers.IntegerField(allow_null=True, help_text="The run that produced the version.")
    workload = serializers.IntegerField(allow_null=True, help_text="The workload of that run.")


class DeploymentAutoscalingOutSerializer(serializers.Serializer):
    min_replicas = serializers.IntegerField()
    max_replicas = serializers.IntegerField()
    target_concurrency = serializers.FloatField()
    stable_window_seconds = serializers.FloatField()
    panic_window_seconds = serializers.FloatField()


class DeploymentScaleSerializer(serializers.Serializer):
    desired = serializers.IntegerField(
        help_text="Replicas wanted now: the autoscaler's choice (or the fixed count); 0 when it is not running.")
    admitted = serializers.IntegerField(help_text="Replicas the scheduler has admitted (the workload's replicas).")
    ready = serializers.IntegerField(help_text="Replicas that passed their readiness check and get traffic.")
    autoscaling = DeploymentAutoscalingOutSerializer(
        allow_null=True, help_text="The autoscaler's settings, with defaults filled in; null: a fixed count.")


AUTOSCALING_DEFAULTS = {"min_replicas": 1, "target_concurrency": 10.0, "stable_window_seconds": 60.0,
                        "panic_window_seconds": 6.0}


def deployment_scale(obj) -> dict:
    """Desired, admitted and ready replicas of a deployment, and its autoscaling settings."""
    spec = obj.spec if isinstance(obj.spec, dict) else {}
    scaling = spec.get("autoscaling") if isinstance(spec.get("autoscaling"), dict) else None
    if scaling is not None:
        scaling = {**AUTOSCALING_DEFAULTS, "max_replicas": scaling.get("min_replicas", 1), **scaling}
    running = obj.status == WorkloadStatus.RUNNING
    runtime = Runtime.of(obj)
    if not running:
        ready = 0
    elif runtime.main_rollout is not None:  # Kubernetes: the controller's counts
        main, canary = runtime.main_rollout, runtime.canary or {}
        ready = int(main.get("ready") or 0) + (1 if canary.get("ready") else 0)
    else:
        ready = sum(1 for r in runtime.replicas if r.get("ready"))
    desired = 0
    if running:
        # The autoscaler's wish (DeploymentScale.desired) once it has decided; else the admitted count.
        row = _scale_row(obj) if scaling is not None else None
        desired = row.desired if row is not None else obj.replicas
    return {"desired": desired, "admitted": obj.replicas if running else 0, "ready": ready, "autoscaling": scaling}


def _scale_row(obj) -> DeploymentScale | None:
    try:
        return obj.scale
    except ObjectDoesNotExist:
        return None


class DeploymentSerializer(WorkloadSerializer):
    """A deployment as the API shows it: a workload plus the URL to call it through Cairn."""

    gateway_url = serializers.SerializerMethodField(
        help_text="Call the deployment here, with a project member's API token or a deployment key "
                  "(docs/deployments.md).")

    model_source = serializers.SerializerMethodField(
        help_text="The model it serves and the run that produced it (lineage); null when it serves none.")

    scale = serializers.SerializerMethodField(
        help_text="Replicas desired (autoscaler), admitted and ready, and the autoscaling settings.")

    class Meta(WorkloadSerializer.Meta):
        fields = [*WorkloadSerializer.Meta.fields, "gateway_url", "model_source", "scale"]
        read_only_fields = fields

    @extend_schema_field(DeploymentScaleSerializer)
    def get_scale(self, obj) -> dict:
        return deployment_scale(obj)

    def get_gateway_url(self, obj) -> str:
        return deployment_gateway_url(obj) or ""

    @extend_schema_field(ModelSourceSerializer(allow_null=True))
    def get_model_source(self, obj) -> dict | None:
        return model_source(obj.spec)

    def get_endpoint(self, obj) -> str | None:
        """For whoever may call it while it runs: the gateway, whatever backend serves it."""
        return self.get_gateway_url(obj) if super().get_endpoint(obj) else None


class DeploymentKeySerializer(serializers.ModelSerializer):
    display = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = DeploymentKey
        fields = ["id", "name", "prefix", "display", "created_by", "created_at", "last_used_at", "revoked_at", "active"]
        read_only_fields = fields

    def get_display(self, obj: DeploymentKey) -> str:
        return f"{KEY_PREFIX}{obj.prefix}_…"


class DeploymentKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)


class DeploymentKeyCreatedSerializer(DeploymentKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The secret key. Shown once, never again.")

    class Meta(DeploymentKeySerializer.Meta):
        fields = [*DeploymentKeySerializer.Meta.fields, "key"]
        read_only_fields = fields


class DeploymentRevisionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = DeploymentRevision
        fields = ["number", "spec", "strategy", "created_by", "created_at"]
        read_only_fields = fields


class RevisionResourcesSerializer(StrictSerializer):
    """A new size per replica: only what is given changes (as a workload's `resources`)."""

    gpu = serializers.DecimalField(max_digits=6, decimal_places=3, min_value=0, max_value=MAX_GPU_PER_REPLICA,
                                   required=False, help_text="GPUs per replica; fractions below 1 share a GPU.")
    cpu = serializers.DecimalField(max_digits=7, decimal_places=3, min_value=Decimal("0.001"),
                                   max_value=MAX_CPU_PER_REPLICA, required=False, help_text="CPU cores per replica.")
    memory = MemoryField(required=False, help_text="Memory per replica: '512Mi', '4Gi' or MiB as a number.")

    validate_gpu = ResourcesSerializer.validate_gpu
    validate_memory = ResourcesSerializer.validate_memory

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give at least one of gpu, cpu, memory.")
        return attrs

    @staticmethod
    def sizes(data: dict) -> dict:
        """The validated values as the Workload's per-replica fields."""
        sizes = {}
        if "gpu" in data:
            sizes["gpu_milli"] = int(data["gpu"] * 1000)
        if "cpu" in data:
            sizes["cpu_milli"] = int(data["cpu"] * 1000)
        if "memory" in data:
            sizes["memory_mb"] = data["memory"]
        return sizes


class DeploymentRevisionCreateSerializer(StrictSerializer):
    """What changes (at least one of command, image, env, resources) and how it is rolled out."""

    command = CommandField(required=False)
    image = serializers.CharField(required=False, max_length=500)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10000), required=False)
    resources = RevisionResourcesSerializer(required=False, help_text="A new size per replica (rolling update only).")
    strategy = serializers.ChoiceField(choices=["rolling", "canary"], default="rolling")
    canary_weight = serializers.IntegerField(min_value=1, max_value=99, default=10,
                                             help_text="Percent of requests the canary gets (strategy canary).")
    max_unavailable = serializers.IntegerField(
        min_value=0, max_value=64, required=False,
        help_text="Replicas below the deployment's number during a rolling update (default 1, or 0 with max_surge).")
    max_surge = serializers.IntegerField(
        min_value=0, max_value=16, default=0,
        help_text="Extra replicas of the new revision during a rolling update, admitted by the scheduler "
                  "under the project's quota like a scale-up: each is ready before an old one stops.")

    def validate(self, attrs):
        if not any(key in attrs for key in ("command", "image", "env", "resources")):
            raise serializers.ValidationError({"detail": "Give a new command, image, env or resources."})
        attrs.setdefault("max_unavailable", 0 if attrs["max_surge"] else 1)
        if attrs["max_unavailable"] == 0 and attrs["max_surge"] == 0:
            raise serializers.ValidationError(
                {"detail": "max_unavailable and max_surge cannot both be 0: no replica could be replaced."})
        return attrs

    def changes(self) -> dict:
        data = self.validated_data
        found = {key: data[key] for key in ("command", "image", "env") if key in data}
        if "resources" in data:
            found["resources"] = RevisionResourcesSerializer.sizes(data["resources"])
        return found


class RolloutReplicaSerializer(serializers.Serializer):
    replica = serializers.IntegerField()
    revision = serializers.IntegerField(allow_null=True)
    ready = serializers.BooleanField()
    surge = serializers.BooleanField(help_text="An extra replica of the rollout, released when it ends.")


class RolloutStatusSerializer(serializers.Serializer):
    stable_revision = serializers.IntegerField()
    canary_revision = serializers.IntegerField(allow_null=True)
    canary_weight = serializers.IntegerField()
    max_unavailable = serializers.IntegerField()
    max_surge = serializers.IntegerField()
    surge = serializers.IntegerField(help_text="Surge replicas admitted (counted in the deployment's replicas).")
    surge_wanted = serializers.IntegerField(help_text="Surge replicas the rollout asks the scheduler for.")
    pending_reason = serializers.CharField(help_text="Why the surge waits (the scheduler's words), or empty.")
    replicas = RolloutReplicaSerializer(many=True)
    complete = serializers.BooleanField(help_text="Every replica runs its planned revision and is ready.")
