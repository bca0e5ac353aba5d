"""Realtime payloads and groups of telemetry (sent after commit through apps.core.realtime)."""
from __future__ import annotations

from apps.core.realtime import workload_telemetry_group  # noqa: F401 (named in the kernel; published here)

NODES_GROUP = "telemetry.nodes"  # every node's samples: the dashboard's cluster view


def _rows(samples) -> list[dict]:
    return [{"node": s.node, "gpu": s.gpu, "workload": s.workload_id, "metric": s.metric, "value": s.value,
             "time": s.time.timestamp()} for s in samples]


def samples_event(samples) -> dict:
    """A project's workload samples, on the project's events socket."""
    return {"type": "telemetry.samples", "samples": _rows(samples)}


def nodes_event(samples) -> dict:
    """Samples of some nodes, for NODES_GROUP."""
    return {"type": "telemetry.nodes", "samples": _rows(samples)}


def workload_samples_event(workload_id: int, samples) -> dict:
    return {"type": "workload.telemetry", "workload": workload_id,
            "samples": [{"node": s.node, "gpu": s.gpu, "metric": s.metric, "value": s.value,
                         "time": s.time.timestamp()} for s in samples]}
