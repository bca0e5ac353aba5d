from rest_framework import serializers

from apps.workloads.api.isolation import IsolatedSpecMixin
from apps.workloads.api.serializers import CommandField, RunTimeLimitField, WorkloadCreateSerializer
from apps.workloads.api.workdir import WorkingDirMixin
from apps.workloads.choices import Kind


class TrainingJobCreateSerializer(WorkingDirMixin, IsolatedSpecMixin, WorkloadCreateSerializer):
    """A (possibly distributed) training job: `replicas` processes started together (gang)."""

    kind = Kind.TRAINING

    command = CommandField(required=False, help_text="Shell string or argv list. Required unless `image` is given.")
    replicas = serializers.IntegerField(required=False, default=1, min_value=1, max_value=512)
    max_runtime_seconds = RunTimeLimitField(
        required=False,
        help_text="Run-time limit in seconds (60 .. 2592000, i.e. 30 days; null or omitted: none). A run still "
                  "going after that long is stopped (SIGTERM, then SIGKILL after the grace period) and ends failed "
                  "with reason DeadlineExceeded. Restarts count against it; a requeue after a preemption starts it "
                  "afresh. The scheduler uses it for estimated starts and GPU-hour budgets.",
    )

    nproc_per_node = serializers.IntegerField(
        required=False, min_value=1, max_value=256,
        help_text="Processes per replica a launcher starts (NPROC_PER_NODE, PET_NPROC_PER_NODE for torchrun). "
                  "Default: one per whole GPU, at least 1.",
    )
    hang_timeout_seconds = serializers.IntegerField(
        required=False, min_value=1, max_value=7 * 86400,
        help_text="Self-healing (docs/training.md): a rank that reports progress with the cairn SDK and makes no step "
                  "and writes no output for this long is hung: its stacks are recorded and the whole gang restarts from "
                  "the last checkpoint (reason Hung). Default 600.",
    )
    straggler_policy = serializers.ChoiceField(
        choices=["alert", "evict", "off"], required=False,
        help_text="What a straggler (a rank persistently slower than its peers) does: alert (an event and a badge; "
                  "the default), evict (its node is cordoned as SlowNode and the gang resumes from the last checkpoint "
                  "elsewhere) or off.",
    )
    straggler_evict_max_fraction = serializers.FloatField(
        required=False, min_value=0.01, max_value=1.0,
        help_text="Under evict: the largest share of the gang's ranks one decision removes (at least one rank; "
                  "default 0.25). A job that would need more, or a whole group of ranks slow together from the start, "
                  "is not evicted: its events say why.",
    )

    def validate(self, attrs):
        if not attrs.get("command") and not attrs.get("image"):
            raise serializers.ValidationError({"command": ["A training job needs a command (or an image)."]})
        return attrs

    def build_spec(self, data):
        spec = super().build_spec(data)
        if data.get("command"):
            spec["command"] = data["command"]
        for key in ("nproc_per_node", "hang_timeout_seconds", "straggler_policy", "straggler_evict_max_fraction"):
            if data.get(key) is not None:
                spec[key] = data[key]
        return spec


class GoodputSerializer(serializers.Serializer):
    goodput = serializers.FloatField(allow_null=True, source="ratio",
                                     help_text="Productive time / wall time (null: nothing ran yet, or a kind that "
                                               "does not run to completion).")
    wall_seconds = serializers.FloatField(help_text="From the first start to the end (or now), over all attempts.")
    productive_seconds = serializers.FloatField()
    lost_seconds = serializers.FloatField(help_text="Work since the last checkpoint at each failure: "
                                                    "redone_seconds + hung_seconds.")
    redone_seconds = serializers.FloatField(help_text="Steps since the last checkpoint that the next attempt did again.")
    hung_seconds = serializers.FloatField(help_text="Time hung attempts made no progress before Cairn restarted them.")
    overhead_seconds = serializers.FloatField(help_text="Restarts: from a failure to the next attempt's first step.")
    gpu_hours_lost = serializers.FloatField(help_text="(lost + overhead) x the job's GPUs.")


class CheckpointSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    replica = serializers.IntegerField()
    step = serializers.IntegerField()
    name = serializers.CharField()
    size_bytes = serializers.IntegerField()
    save_seconds = serializers.FloatField(help_text="From save() to persisted.")
    blocking_seconds = serializers.FloatField(help_text="How long training waited for it.")
    two_stage = serializers.BooleanField()
    time = serializers.DateTimeField(source="created_at")


class RankProgressSerializer(serializers.Serializer):
    replica = serializers.IntegerField()
    attempt = serializers.IntegerField(help_text="The attempt of this report (older than the workload's: not yet "
                                                 "reported in the current one).")
    step = serializers.IntegerField()
    step_seconds = serializers.FloatField(allow_null=True, help_text="Its latest step's duration.")
    step_changed_at = serializers.DateTimeField()
    reported_at = serializers.DateTimeField()
    straggler = serializers.BooleanField(help_text="Flagged as a straggler in the current attempt.")
    ratio_to_peer_median = serializers.FloatField(
        allow_null=True, help_text="Its step time / the median of its peers', over the last 10 steps all ranks "
                                   "reported (2.0: twice as slow; null: no peers to compare with).")


class RestartSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(help_text="The attempt that ended.")
    cause = serializers.CharField(help_text="Restarting (a rank failed), Hung, SlowNode, NodeUnhealthy, "
                                            "Rescheduled, Requeued (preempted)...")
    message = serializers.CharField()
    time = serializers.DateTimeField()
    lost_seconds = serializers.FloatField(help_text="Work since its last checkpoint (hung time included).")
    hung_seconds = serializers.FloatField()
    overhead_seconds = serializers.FloatField(help_text="From its end to the next attempt's first step.")
    resumed_at_step = serializers.IntegerField(allow_null=True, help_text="The next attempt's first reported step.")


class RankPlacementSerializer(serializers.Serializer):
    replica = serializers.IntegerField()
    node = serializers.CharField(allow_null=True)
    gpus = serializers.ListField(child=serializers.IntegerField(), help_text="GPU indices on the node.")


class SlowGroupSerializer(serializers.Serializer):
    ranks = serializers.ListField(child=serializers.IntegerField())
    ratio = serializers.FloatField(help_text="Their median step time / the others', over the first steps.")
    since = serializers.IntegerField(help_text="The first step all ranks reported.")
    placement = RankPlacementSerializer(many=True, required=False, help_text="Where each of them runs.")


class JobSlowdownSerializer(serializers.Serializer):
    ratio = serializers.FloatField(help_text="The ranks' step time / their own usual, median.")
    since = serializers.IntegerField()


class ResilienceSerializer(serializers.Serializer):
    goodput = GoodputSerializer()
    checkpoints = CheckpointSerializer(many=True, help_text="The last 50, oldest first.")
    ranks = RankProgressSerializer(many=True, help_text="Each rank's last progress, by replica.")
    restarts = RestartSerializer(many=True, help_text="Every attempt that ended in a restart, oldest first.")
    stragglers = serializers.ListField(child=serializers.IntegerField(), help_text="Ranks flagged in this attempt.")
    slow_groups = SlowGroupSerializer(many=True, help_text="Ranks slower than the others together since the start "
                                                           "of this attempt: a placement finding, not stragglers.")
    slowdown = JobSlowdownSerializer(allow_null=True, help_text="The whole job slowed down in this attempt (null: no).")
    hang_timeout_seconds = serializers.IntegerField()
    straggler_policy = serializers.CharField()


class ProjectGoodputSerializer(serializers.Serializer):
    jobs = serializers.IntegerField()
    goodput = serializers.FloatField(allow_null=True)
    wall_hours = serializers.FloatField()
    productive_hours = serializers.FloatField()
    lost_hours = serializers.FloatField()
    overhead_hours = serializers.FloatField()
    gpu_hours_lost = serializers.FloatField()
