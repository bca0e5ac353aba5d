from django.db import models

from apps.workloads.models import Workload


class TelemetrySample(models.Model):
    """One raw sample: a metric of a node, or of one GPU of it (gpu set), optionally attributed
    to the workload using that GPU. Kept for TELEMETRY_RAW_RETENTION, then rolled up."""

    id = models.BigAutoField(primary_key=True)
    time = models.DateTimeField()
    node = models.CharField(max_length=253)
    gpu = models.SmallIntegerField(null=True, blank=True)
    workload = models.ForeignKey(Workload, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                 db_index=False)
    metric = models.CharField(max_length=64)
    value = models.FloatField()

    class Meta:
        indexes = [
            models.Index(fields=["node", "metric", "time"], name="telemetry_node_metric_time"),
            models.Index(fields=["workload", "metric", "time"], name="telemetry_wl_metric_time"),
            models.Index(fields=["time"], name="telemetry_time"),
        ]


class TelemetryRollup(models.Model):
    """count/sum/min/max of samples per `resolution` seconds (60, then 3600), older than raw retention."""

    id = models.BigAutoField(primary_key=True)
    resolution = models.PositiveIntegerField()
    bucket_start = models.DateTimeField()
    node = models.CharField(max_length=253)
    gpu = models.SmallIntegerField(null=True, blank=True)
    workload = models.ForeignKey(Workload, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                 db_index=False)
    metric = models.CharField(max_length=64)
    count = models.PositiveIntegerField()
    sum = models.FloatField()
    min = models.FloatField()
    max = models.FloatField()

    class Meta:
        indexes = [
            models.Index(fields=["resolution", "node", "metric", "bucket_start"], name="rollup_node_metric"),
            models.Index(fields=["resolution", "workload", "metric", "bucket_start"], name="rollup_wl_metric"),
            models.Index(fields=["resolution", "bucket_start"], name="rollup_time"),
        ]


class NodeHealthEvent(models.Model):
    """A GPU fault seen in a node's telemetry (a new XID error, new uncorrectable ECC errors) and
    what Cairn did about it. `node` is null when the telemetry names a node Cairn does not know."""

    created_at = models.DateTimeField(auto_now_add=True)
    node = models.ForeignKey("clusters.Node", on_delete=models.CASCADE, null=True, blank=True,
                             related_name="health_events")
    node_name = models.CharField(max_length=253)
    gpu = models.SmallIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=32)  # GpuXidError | GpuEccError
    metric = models.CharField(max_length=64)
    value = models.FloatField()
    previous = models.FloatField(null=True, blank=True)
    message = models.TextField(blank=True)
    cordoned = models.BooleanField(default=False)  # this event cordoned the node (it was schedulable)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["node_name", "gpu", "reason", "-created_at"], name="health_event_lookup")]

    def __str__(self) -> str:
        return f"{self.node_name} GPU {self.gpu}: {self.reason}"
