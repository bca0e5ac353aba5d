"""NVIDIA DCGM exporter text (Prometheus exposition format) -> per-GPU samples. Pure.

The exporter publishes one series per GPU with labels gpu, UUID, device, modelName, Hostname
and, when it maps GPUs to pods, namespace / pod / container. Parsing uses prometheus-client's
own text parser."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

# DCGM field -> Cairn metric name (units in the name).
METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": "gpu.util_percent",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gpu.mem_copy_util_percent",
    "DCGM_FI_DEV_FB_USED": "gpu.memory_used_mb",
    "DCGM_FI_DEV_FB_FREE": "gpu.memory_free_mb",
    "DCGM_FI_DEV_GPU_TEMP": "gpu.temperature_c",
    "DCGM_FI_DEV_MEMORY_TEMP": "gpu.memory_temperature_c",
    "DCGM_FI_DEV_POWER_USAGE": "gpu.power_w",
    "DCGM_FI_DEV_SM_CLOCK": "gpu.sm_clock_mhz",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "gpu.ecc_sbe_volatile",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "gpu.ecc_dbe_volatile",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "gpu.ecc_sbe_aggregate",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "gpu.ecc_dbe_aggregate",
    "DCGM_FI_DEV_XID_ERRORS": "gpu.xid_last",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gpu.gr_engine_active",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "gpu.pcie_replays",
}


@dataclass
class GpuSample:
    node: str
    gpu: int
    metric: str
    value: float
    labels: dict = field(default_factory=dict)  # uuid, model, pod, namespace, container


def parse_dcgm(text: str, *, node: str) -> list[GpuSample]:
    """Samples of the known DCGM fields; unknown fields, NaN values and series without a gpu label are skipped.

    Raises ValueError on text that is not the exposition format."""
    out: list[GpuSample] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # The parser names counter samples `<family>_total`, whatever the text said.
            metric = METRICS.get(sample.name) or METRICS.get(sample.name.removesuffix("_total"))
            if metric is None or "gpu" not in sample.labels:
                continue
            try:
                gpu = int(sample.labels["gpu"])
            except ValueError:
                continue
            if not math.isfinite(sample.value):
                continue
            labels = {"uuid": sample.labels.get("UUID", ""), "model": sample.labels.get("modelName", "")}
            for key in ("namespace", "pod", "container"):
                if sample.labels.get(key):
                    labels[key] = sample.labels[key]
            out.append(GpuSample(node=node, gpu=gpu, metric=metric,
                                 value=float(sample.value), labels=labels))
    return out
