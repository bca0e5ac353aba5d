from rest_framework import serializers

from apps.clusters.selectors import QueuePositions
from apps.workloads.api.serializers import WaitingOnField, WorkloadResourcesOutSerializer
from apps.workloads.models import Workload


class QueueEntrySerializer(serializers.ModelSerializer):
    """One queued workload of a pool. Workloads of projects the caller is not a member of show
    only their place, priority, size and what they wait on (no id, name, project or reason)."""

    position = serializers.SerializerMethodField()
    id = serializers.SerializerMethodField()
    name = serializers.SerializerMethodField()
    project = serializers.SerializerMethodField()
    pending_reason = serializers.SerializerMethodField()
    priority = serializers.SerializerMethodField()
    waiting_on = WaitingOnField()
    resources = serializers.SerializerMethodField()
    submitted_at = serializers.DateTimeField(source="created_at")
    mine = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = ["position", "id", "name", "project", "kind", "priority", "replicas", "resources", "gpu_model",
                  "pending_reason", "waiting_on", "estimated_start", "submitted_at", "mine"]
        read_only_fields = fields

    def get_position(self, obj) -> int | None:
        positions = self.context.setdefault("queue_positions", QueuePositions())
        return positions.of(pool_id=obj.pool_id, workload_id=obj.pk)

    def get_mine(self, obj) -> bool:
        visible = self.context.get("visible_projects")
        return visible is None or obj.project_id in visible

    def get_id(self, obj) -> int | None:
        return obj.pk if self.get_mine(obj) else None

    def get_name(self, obj) -> str | None:
        return obj.name if self.get_mine(obj) else None

    def get_project(self, obj) -> str | None:
        return obj.project.slug if self.get_mine(obj) else None

    def get_pending_reason(self, obj) -> str | None:
        return obj.pending_reason if self.get_mine(obj) else None

    def get_priority(self, obj) -> str:
        return f"P{obj.priority}"

    def get_resources(self, obj) -> WorkloadResourcesOutSerializer:
        return {"gpu": obj.gpu_milli / 1000, "cpu": obj.cpu_milli / 1000, "memory_mb": obj.memory_mb}
