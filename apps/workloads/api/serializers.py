"""Workload serializers: a shared base for the spec fields every kind has, one subclass per kind."""
import re
import secrets
from datetime import datetime
from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.clusters.models import Node
from apps.clusters.selectors import QueuePositions
from apps.core.serializers import StrictSerializer
from apps.storage.api.serializers import DatasetMountListField, VolumeMountListField

from ..choices import Priority, StopCause, WaitingOn, WorkloadStatus
from ..deadlines import MAX_RUNTIME_LIMIT_SECONDS, MIN_RUNTIME_LIMIT_SECONDS
from ..kinds import kind_route, registered_spec
from ..models import Workload, WorkloadEvent
from ..runtime import Runtime
from .accelerators import AcceleratorSerializer, ArchField, accelerator_fields, check_accelerator

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# Set by the backends; a user's env may not override them.
RESERVED_ENV = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK",
                "CUDA_VISIBLE_DEVICES", "NNODES", "NPROC_PER_NODE", "PORT"}
MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|K|M|G|T|k)?\s*$")
# Bytes per unit; a bare number means MiB.
MEMORY_UNIT_BYTES = {None: 1024**2, "k": 1000, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4,
                     "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}
MAX_GPU_PER_REPLICA = 64
MAX_CPU_PER_REPLICA = 1024
MAX_MEMORY_MB_PER_REPLICA = 16 * 1024 * 1024  # 16 TiB


def parse_memory_mb(value) -> int:
    """'512Mi', '4Gi', '1G', or a bare number of MiB -> MiB."""
    if isinstance(value, bool):
        raise serializers.ValidationError("Give memory as a quantity like '4Gi' or a number of MiB.")
    if isinstance(value, int | float):
        mb = float(value)
    elif isinstance(value, str):
        match = MEMORY_RE.match(value)
        if not match:
            raise serializers.ValidationError(f"'{value[:40]}' is not a memory quantity like '512Mi' or '4Gi'.")
        mb = float(match.group(1)) * MEMORY_UNIT_BYTES[match.group(2)] / 1024**2
    else:
        raise serializers.ValidationError("Give memory as a quantity like '4Gi' or a number of MiB.")
    if mb != mb or mb < 1:
        raise serializers.ValidationError("Memory must be at least 1Mi.")
    if mb > MAX_MEMORY_MB_PER_REPLICA:
        raise serializers.ValidationError("Memory per replica cannot exceed 16Ti.")
    return int(round(mb))


class WaitingOnField(serializers.ChoiceField):
    """What a queued workload waits on (a WaitingOn value); null when it waits on nothing."""

    def __init__(self, **kwargs):
        super().__init__(choices=WaitingOn.choices, allow_null=True, read_only=True, **kwargs)

    def to_representation(self, value):
        return value or None


@extend_schema_field({"type": "string", "enum": ["P0", "P1", "P2", "P3", "P4", "P5"], "default": "P3"})
class PriorityField(serializers.Field):
    """Accepts "P0".."P5" or 0..5; returns "P<n>"."""

    default_error_messages = {"invalid": "Priority must be one of P0 (highest) .. P5 (lowest)."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, str) and re.fullmatch(r"[Pp][0-5]", data.strip()):
            return int(data.strip()[1])
        if isinstance(data, int) and 0 <= data <= 5:
            return data
        self.fail("invalid")

    def to_representation(self, value):
        return f"P{value}"


@extend_schema_field({"oneOf": [{"type": "string", "example": "4Gi"}, {"type": "number"}]})
class MemoryField(serializers.JSONField):
    """A memory quantity: its own class, so the schema override does not reach DRF's JSONField
    (every JSON field of the API was documented as "string or number" when it did)."""


class ResourcesSerializer(StrictSerializer):
    gpu = serializers.DecimalField(max_digits=6, decimal_places=3, min_value=0, max_value=MAX_GPU_PER_REPLICA,
                                   default=0, help_text="GPUs per replica; fractions below 1 share a GPU (0.25).")
    cpu = serializers.DecimalField(max_digits=7, decimal_places=3, min_value=Decimal("0.001"), max_value=MAX_CPU_PER_REPLICA,
                                   default=1, help_text="CPU cores per replica.")
    memory = MemoryField(default="1Gi", help_text="Memory per replica: '512Mi', '4Gi' or MiB as a number.")

    def validate_gpu(self, value):
        if value > 1 and value != int(value):
            raise serializers.ValidationError("Above one GPU, ask for a whole number of GPUs.")
        return value

    def validate_memory(self, value):
        return parse_memory_mb(value)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
class CommandField(serializers.Field):
    """A shell string (run with /bin/sh -c) or an argv list."""

    default_error_messages = {"invalid": "Give the command as a string or a list of strings."}

    def to_internal_value(self, data):
        if isinstance(data, str):
            if not data.strip():
                raise serializers.ValidationError("The command is empty.")
            if len(data) > 65536:
                raise serializers.ValidationError("The command is longer than 65536 characters.")
            return ["/bin/sh", "-c", data]
        if isinstance(data, list) and data and all(isinstance(a, str) for a in data):
            if len(data) > 4096 or sum(len(a) for a in data) > 65536:
                raise serializers.ValidationError("The command is too long.")
            if not data[0].strip():
                raise serializers.ValidationError("The program name is empty.")
            return data
        self.fail("invalid")

    def to_representation(self, value):
        return value


@extend_schema_field({"type": "integer", "minimum": MIN_RUNTIME_LIMIT_SECONDS, "maximum": MAX_RUNTIME_LIMIT_SECONDS,
                      "nullable": True, "example": 7200})
class RunTimeLimitField(serializers.Field):
    """Seconds, as a JSON integer (null: no limit). Strings are refused rather than parsed, so
    "2h" gets a clear answer instead of a guess (the CLI turns --max-runtime 2h into 7200)."""

    default_error_messages = {
        "invalid": "Give the run-time limit as a whole number of seconds, e.g. 7200 for 2 hours (null: no limit).",
        "min": f"The run-time limit must be at least {MIN_RUNTIME_LIMIT_SECONDS} seconds.",
        "max": f"The run-time limit can be at most {MAX_RUNTIME_LIMIT_SECONDS} seconds (30 days).",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        if isinstance(data, float) and not data.is_integer():  # also NaN and infinities
            self.fail("invalid")
        seconds = int(data)
        if seconds < MIN_RUNTIME_LIMIT_SECONDS:
            self.fail("min")
        if seconds > MAX_RUNTIME_LIMIT_SECONDS:
            self.fail("max")
        return seconds

    def to_representation(self, value):
        return value


class WorkloadCreateSerializer(StrictSerializer):
    """Fields shared by every kind. Subclasses add their own and set `kind`."""

    kind: str = ""
    default_preemptible = True

    name = serializers.CharField(required=False, max_length=63,
                                 help_text="DNS label: lowercase letters, digits, '-'. Generated when omitted.")
    pool = serializers.CharField(required=False, max_length=40,
                                 help_text="Resource pool; defaults to the project's only quota pool.")
    image = serializers.CharField(required=False, max_length=512, allow_blank=False)
    env = serializers.DictField(child=serializers.CharField(max_length=32768, allow_blank=True, trim_whitespace=False),
                                required=False, default=dict)
    resources = ResourcesSerializer(required=False)
    gpu_model = serializers.CharField(required=False, max_length=100, allow_blank=True, default="")
    accelerator = AcceleratorSerializer(required=False, help_text="Accelerators per replica: {type, model, count}; "
                                        "resources.gpu and gpu_model are the NVIDIA short form.")
    arch = ArchField(required=False, help_text="CPU architecture(s) the image runs on: amd64, arm64 or a list.")
    priority = PriorityField(required=False, default=Priority.P3)
    preemptible = serializers.BooleanField(required=False)
    max_restarts = serializers.IntegerField(required=False, min_value=0, max_value=100, default=0)
    volumes = VolumeMountListField()  # project volumes (apps/storage, docs/data.md)
    datasets = DatasetMountListField()  # dataset versions, read-only, through the node cache

    def validate_name(self, value):
        if not NAME_RE.match(value):
            raise serializers.ValidationError(
                "Use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit."
            )
        return value

    def validate_env(self, value):
        if len(value) > 200:
            raise serializers.ValidationError("At most 200 environment variables.")
        for key in value:
            if not ENV_KEY_RE.match(key):
                raise serializers.ValidationError(f"'{key[:60]}' is not a valid environment variable name.")
            if key in RESERVED_ENV or key.startswith("CAIRN_"):
                raise serializers.ValidationError(f"'{key}' is set by Cairn and cannot be overridden.")
        return value

    def validate_for_pool(self, pool) -> None:
        """Checks that need the pool the workload goes to (known after validation); raise
        ValidationError like a field check. Subclasses extend it."""
        check_accelerator(self.validated_data, pool)
        check_fits_a_node(self.validated_data, pool)

    def build_spec(self, data: dict) -> dict:
        """The kind-specific part stored in Workload.spec."""
        spec = {"env": data.get("env", {})}
        if data.get("image"):
            spec["image"] = data["image"]
        if data.get("volumes"):
            spec["volumes"] = [dict(v) for v in data["volumes"]]
        if data.get("datasets"):
            spec["datasets"] = [dict(d) for d in data["datasets"]]
        return spec

    def to_submission(self) -> dict:
        """Keyword arguments for `workload_submit` (minus project, pool and user)."""
        data = self.validated_data
        resources = data.get("resources") or ResourcesSerializer().to_internal_value({})
        return {
            "kind": self.kind,
            "name": data.get("name") or f"{self.kind}-{secrets.token_hex(3)}",
            "spec": self.build_spec(data),
            "priority": data["priority"],
            "preemptible": data.get("preemptible", self.default_preemptible),
            "replicas": data.get("replicas", 1),
            "gpu_milli": int(resources["gpu"] * 1000),
            "cpu_milli": int(resources["cpu"] * 1000),
            "memory_mb": resources["memory"],
            "gpu_model": data.get("gpu_model", ""),
            "max_restarts": data["max_restarts"],
            "max_runtime_seconds": data.get("max_runtime_seconds"),
            **accelerator_fields(data),
        }


# The seam scheduling offers (workloads may not import it): the policy's own words for a replica
# no node of a pool can hold, so submission and the cycle say the same (apps/scheduling/apps.py).
node_fit_refusal: dict = {}


def check_fits_a_node(data: dict, pool) -> None:
    """A replica larger than every node of the pool could never start: refused at once (400,
    naming the largest node), instead of queued forever behind a reason that says to wait."""
    resources = data.get("resources") or ResourcesSerializer().to_internal_value({})
    ask = {"gpu_milli": int(resources["gpu"] * 1000), "gpu_model": data.get("gpu_model", ""),
           **accelerator_fields(data)}
    gpu_milli = ask["gpu_milli"]
    # With GPUs asked, only the nodes of an allowed model ("A|B") count.
    models = {m for m in ask["gpu_model"].split("|") if m} if gpu_milli else set()
    # What each node leaves Cairn: its allocatable less the requests of pods not Cairn's
    # (DaemonSets, other tenants; Node.others_*, kept by the Kubernetes reconciler), as the
    # scheduler's cycle counts it.
    found = [n for n in Node.objects.filter(pool=pool).only(
        "name", "gpu_count", "gpu_model", "cpu_milli_allocatable", "memory_mb_allocatable", "others_gpu_milli",
        "others_cpu_milli", "others_memory_mb") if not models or n.gpu_model in models]
    nodes = [(n.name, *n.free_for_cairn()) for n in found]
    shape = (gpu_milli, int(resources["cpu"] * 1000), resources["memory"])
    refusal = node_fit_refusal["largest_node"](pool_name=pool.name, nodes=nodes, ask=shape)
    if refusal:
        if any(n.others_gpu_milli or n.others_cpu_milli or n.others_memory_mb for n in found):
            refusal += (" for Cairn: what pods not Cairn's (DaemonSets, other tenants) request on its nodes is "
                        "not Cairn's to use")
        raise serializers.ValidationError({"resources": [refusal[0].upper() + refusal[1:] + "."]})


class EventSerializer(serializers.ModelSerializer):
    time = serializers.DateTimeField(source="created_at")

    class Meta:
        model = WorkloadEvent
        fields = ["id", "time", "type", "reason", "message", "from_status", "to_status", "attachment"]
        read_only_fields = fields


class WorkloadResourcesOutSerializer(serializers.Serializer):
    gpu = serializers.FloatField()
    cpu = serializers.FloatField()
    memory_mb = serializers.IntegerField()


def workload_endpoint(workload: Workload, *, user, role: str | None) -> str | None:
    """Where a running workload is reached, for those who may reach it, else None: the kind
    decides (`KindSpec.endpoint`; a notebook's IDE, a deployment's URL). No credential appears
    in an API answer."""

    if workload.status != WorkloadStatus.RUNNING:
        return None
    if not Runtime.of(workload).url or user is None or not getattr(user, "is_authenticated", False):
        return None
    spec = registered_spec(workload.kind)
    if spec is None or spec.endpoint is None:
        return None
    return spec.endpoint(workload, user=user, role=role)


class WorkloadSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    priority = PriorityField(read_only=True)
    resources = serializers.SerializerMethodField()
    accelerator = serializers.SerializerMethodField(help_text="Accelerators per replica (null: none).")
    arch = serializers.SerializerMethodField(help_text="CPU architectures it may run on (empty: any).")
    restarts = serializers.IntegerField(read_only=True)
    url = serializers.SerializerMethodField()
    ignored_env = serializers.SerializerMethodField(
        help_text="Keys of the spec's env that Cairn sets itself, ignored at the current attempt's launch.")
    endpoint = serializers.SerializerMethodField(
        help_text="Where a running notebook or deployment is reached; null for anyone who may not reach it. "
                  "Notebooks: Cairn's proxy address (/nb/<project>/<id>/lab), for their creator (and the project's "
                  "owners and maintainers when it shares notebooks). "
                  "Deployments: whoever may call it with their own credentials: project members and above, "
                  "and every reader of the project when it is public."
    )
    estimated_start = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField()
    waiting_on = WaitingOnField()
    stop_cause = serializers.ChoiceField(
        choices=StopCause.choices, read_only=True,
        help_text="Why it is stopping or last stopped: user, preempted, deadline, shutdown; empty: none.")
    resubmitted_from = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True,
        help_text="Run again: the ended workload this one runs again, with its spec (docs/training.md); null: none.")
    preempted_by = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The workload it was last preempted for (until it starts again).")

    class Meta:
        model = Workload
        fields = ["id", "name", "kind", "project", "pool", "status", "status_reason", "status_message",
                  "pending_reason", "waiting_on", "estimated_start", "queue_position", "stop_cause", "preempted_by",
                  "preemptions", "exit_code", "priority",
                  "preemptible", "replicas", "resources", "gpu_model", "accelerator", "arch", "max_restarts", "max_runtime_seconds",
                  "attempt", "restarts", "spec", "conditions", "placement", "ignored_env", "resubmitted_from", "created_by", "created_at",
                  "updated_at", "admitted_at", "started_at", "finished_at", "url", "endpoint"]
        read_only_fields = fields

    def get_ignored_env(self, obj) -> list[str]:
        # Workload.runtime is the backend's private bookkeeping: only this one fact is for users.
        return Runtime.of(obj).ignored_env

    def get_endpoint(self, obj) -> str | None:
        request = self.context.get("request")
        view = self.context.get("view")
        return workload_endpoint(obj, user=getattr(request, "user", None), role=getattr(view, "role", None))

    @extend_schema_field({"type": "object", "nullable": True, "properties": {
        "type": {"type": "string"}, "model": {"type": "string"}, "count": {"type": "number"}}})
    def get_accelerator(self, obj):
        kind = obj.accelerator_type or ("nvidia" if obj.gpu_milli else "")
        return {"type": kind, "model": obj.gpu_model, "count": obj.gpu_milli / 1000} if kind else None

    def get_arch(self, obj) -> list[str]:
        return [a for a in obj.arch.split("|") if a]

    def get_resources(self, obj) -> WorkloadResourcesOutSerializer:
        return {"gpu": obj.gpu_milli / 1000, "cpu": obj.cpu_milli / 1000, "memory_mb": obj.memory_mb}

    def get_estimated_start(self, obj) -> datetime | None:
        return obj.estimated_start if obj.status == WorkloadStatus.QUEUED else None

    def get_queue_position(self, obj) -> int | None:
        if obj.status != WorkloadStatus.QUEUED:
            return None
        positions = self.context.setdefault("queue_positions", QueuePositions())  # shared by a list's rows
        return positions.of(pool_id=obj.pool_id, workload_id=obj.pk)

    def get_url(self, obj) -> str:
        return f"/api/v1/projects/{obj.project.slug}/{kind_route(obj.kind)}/{obj.pk}/"


class LogQuerySerializer(StrictSerializer):
    replica = serializers.IntegerField(required=False, default=0, min_value=0)
    attempt = serializers.IntegerField(required=False, min_value=1)
    tail = serializers.IntegerField(required=False, min_value=1, max_value=100_000)
    follow = serializers.BooleanField(required=False, default=False)
