import re

from rest_framework import serializers

from apps.clusters.choices import NodeHealth
from apps.core.dates import DateTimeParam
from apps.core.serializers import StrictSerializer

METRIC = re.compile(r"^[a-z0-9_.]{1,64}$")


class SeriesQuerySerializer(StrictSerializer):
    metric = serializers.RegexField(METRIC, required=False)
    gpu = serializers.IntegerField(min_value=0, max_value=1023, required=False)
    since = DateTimeParam(required=False)
    until = DateTimeParam(required=False)
    max_points = serializers.IntegerField(min_value=2, max_value=5000, default=500)

    def validate(self, data):
        if data.get("since") and data.get("until") and data["since"] >= data["until"]:
            raise serializers.ValidationError("since must be before until.")
        return data


# -- cluster overview (output only; documented in docs/live.md) -------------------------------------

class OverviewGpuSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    allocated_milli = serializers.IntegerField(help_text="milli-GPU of this GPU held by active workloads")
    util_percent = serializers.FloatField(allow_null=True)
    memory_used_mb = serializers.FloatField(allow_null=True)
    memory_total_mb = serializers.FloatField(allow_null=True)
    temperature_c = serializers.FloatField(allow_null=True)
    power_w = serializers.FloatField(allow_null=True)
    time = serializers.DateTimeField(allow_null=True, help_text="Latest sample of this GPU (null: none recent)")


class OverviewNodeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.CharField()
    gpu_model = serializers.CharField()
    accelerator_type = serializers.CharField(help_text="nvidia, amd, ascend or none")
    cpu_arch = serializers.CharField(allow_blank=True, help_text="amd64, arm64 (empty: unknown)")
    gpu_count = serializers.IntegerField()
    gpu_memory_mb = serializers.IntegerField()
    health = serializers.ChoiceField(choices=NodeHealth.choices)
    schedulable = serializers.BooleanField()
    cordoned = serializers.BooleanField()
    last_seen_at = serializers.DateTimeField(allow_null=True)
    capacity_gpu_milli = serializers.IntegerField()
    allocated_gpu_milli = serializers.IntegerField()
    used_gpu_milli = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    used_gpus = serializers.IntegerField()
    cpu_milli_allocatable = serializers.IntegerField()
    allocated_cpu_milli = serializers.IntegerField()
    memory_mb_allocatable = serializers.IntegerField()
    allocated_memory_mb = serializers.IntegerField()
    others_gpu_milli = serializers.IntegerField(help_text="Requests of pods not Cairn's (DaemonSets, other tenants): "
                                                "GPUs x 1000. Cairn places work in the allocatable less these.")
    others_cpu_milli = serializers.IntegerField(help_text="CPU (milli-cores) requested by pods not Cairn's.")
    others_memory_mb = serializers.IntegerField(help_text="Memory (MB) requested by pods not Cairn's.")
    cpu_percent = serializers.FloatField(allow_null=True)
    memory_percent = serializers.FloatField(allow_null=True)
    telemetry_time = serializers.DateTimeField(allow_null=True)
    replica_isolation = serializers.CharField(
        allow_null=True, help_text="Local nodes: how replicas are isolated from Cairn and each other "
        "(docs/local-backend.md#isolation); 'none' means not at all.")
    replica_network = serializers.CharField(
        allow_null=True, help_text="Local nodes: 'own' when every workload has a network namespace of its own, "
        "'host' when workloads share the host's network (docs/local-backend.md#isolation).")
    gpus = OverviewGpuSerializer(many=True)


class OverviewPoolSerializer(serializers.Serializer):
    name = serializers.CharField()
    cluster = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    accelerator_models = serializers.ListField(child=serializers.CharField())
    accelerator_types = serializers.ListField(child=serializers.CharField())
    architectures = serializers.ListField(child=serializers.CharField())
    nodes_total = serializers.IntegerField()
    nodes_schedulable = serializers.IntegerField()
    capacity_gpus = serializers.IntegerField()
    capacity_gpu_milli = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    allocated_gpu_milli = serializers.IntegerField()
    used_gpus = serializers.IntegerField()
    used_gpu_milli = serializers.IntegerField()
    cpu_milli_allocatable = serializers.IntegerField(help_text="CPU (milli-cores) of the pool's nodes.")
    allocated_cpu_milli = serializers.IntegerField(help_text="CPU (milli-cores) held by active workloads.")
    memory_mb_allocatable = serializers.IntegerField(help_text="Memory (MiB) of the pool's nodes.")
    allocated_memory_mb = serializers.IntegerField(help_text="Memory (MiB) held by active workloads.")
    nodes = OverviewNodeSerializer(many=True)


class ClusterOverviewSerializer(serializers.Serializer):
    generated_at = serializers.DateTimeField()
    telemetry_max_age_seconds = serializers.IntegerField()
    pools = OverviewPoolSerializer(many=True)
    unpooled_nodes = OverviewNodeSerializer(many=True)
