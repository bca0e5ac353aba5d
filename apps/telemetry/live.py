"""Merging node telemetry for the dashboard's live `cluster` topic. Pure (no I/O).

Samples arrive per batch (a node's scrape, every few seconds per node); a subscriber gets at
most a frame or so per second holding, per node and GPU, the latest value of each metric since
the previous frame. What waits is bounded by nodes x GPUs x metrics, however fast batches come."""
from __future__ import annotations

RESERVED = frozenset({"node", "gpu", "gpus", "time"})


def _field(metric: str) -> str | None:
    """'gpu.util_percent' -> 'util_percent', 'node.cpu_percent' -> 'cpu_percent'."""
    _, _, name = metric.partition(".")
    return name if name and name not in RESERVED else None


class ClusterFrames:
    def __init__(self, *, gpu_memory_mb: dict[str, int] | None = None):
        self.gpu_memory_mb = dict(gpu_memory_mb or {})  # node -> memory of each GPU (inventory)
        self.nodes: dict[str, dict] = {}

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def add(self, samples: list[dict]) -> None:
        """Samples as published by apps.telemetry.events.nodes_event."""
        for s in samples:
            name = _field(s["metric"])
            if name is None:
                continue
            node = self.nodes.get(s["node"])
            if node is None:
                node = self.nodes[s["node"]] = {"node": s["node"], "time": s["time"], "gpus": {}}
            node["time"] = max(node["time"], s["time"])
            if s["gpu"] is None:
                node[name] = s["value"]
                continue
            gpu = node["gpus"].get(s["gpu"])
            if gpu is None:
                gpu = node["gpus"][s["gpu"]] = {"gpu": s["gpu"], "time": s["time"]}
            gpu["time"] = max(gpu["time"], s["time"])
            gpu[name] = s["value"]

    def take(self) -> list[dict]:
        """The frame to send now (none when nothing arrived), and reset."""
        if not self.nodes:
            return []
        nodes = []
        for node in self.nodes.values():
            gpus = []
            for gpu in sorted(node["gpus"].values(), key=lambda g: g["gpu"]):
                if "memory_used_mb" in gpu and "memory_free_mb" in gpu:
                    gpu["memory_total_mb"] = gpu["memory_used_mb"] + gpu["memory_free_mb"]
                elif self.gpu_memory_mb.get(node["node"]):
                    gpu["memory_total_mb"] = float(self.gpu_memory_mb[node["node"]])
                gpus.append(gpu)
            nodes.append({**node, "gpus": gpus})
        self.nodes = {}
        return [{"type": "cluster.telemetry", "nodes": nodes}]
