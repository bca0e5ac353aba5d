"""The live topic of telemetry on the dashboard's socket (docs/live.md), registered in
TelemetryConfig.ready():

  cluster   every node's latest metrics, per GPU (merged by apps.telemetry.live.ClusterFrames,
            at most LIVE_CLUSTER_FPS frames a second), and node inventory changes at once
"""
from __future__ import annotations

from channels.db import database_sync_to_async

from apps.clusters.events import NODE_CHANGES_GROUP
from apps.clusters.models import Node
from apps.core.live import LiveSocket, Topic, register_topic

from .events import NODES_GROUP
from .live import ClusterFrames

LIVE_CLUSTER_FPS = 1  # the cluster heatmap: a frame a second is plenty


@database_sync_to_async
def _gpu_memory_by_node() -> dict[str, int]:
    return dict(Node.objects.filter(gpu_memory_mb__gt=0).values_list("name", "gpu_memory_mb"))


class ClusterTopic(Topic):
    fps = LIVE_CLUSTER_FPS

    def __init__(self, name: str, gpu_memory_mb: dict[str, int]):
        super().__init__(name)
        self.groups = (NODES_GROUP, NODE_CHANGES_GROUP)
        self.frames = ClusterFrames(gpu_memory_mb=gpu_memory_mb)

    def offer(self, event):
        kind = event.get("type")
        if kind == "telemetry.nodes":
            self.frames.add(event.get("samples") or [])
        elif kind == "node.changed":
            return [event]
        return []

    def pending(self):
        return bool(self.frames)

    def take(self):
        return self.frames.take()


async def _cluster(socket: LiveSocket, match) -> Topic:
    return ClusterTopic(match.string, await _gpu_memory_by_node())


def register_topics() -> None:
    register_topic("cluster", r"cluster", _cluster)
