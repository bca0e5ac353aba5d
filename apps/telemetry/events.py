"""Realtime payloads of telemetry."""
from __future__ import annotations

NODES_GROUP = "telemetry.nodes"


def samples_event(samples) -> dict:
    return {"type": "telemetry.samples",
            "samples": [{"node": s.node, "gpu": s.gpu, "workload": s.workload_id, "metric": s.metric,
                         "value": s.value, "time": s.time.timestamp()} for s in samples]}
