"""Per-vendor exporter parsers behind one interface. Pure.

`parse_exporter(vendor, text, node=...)` turns a vendor's Prometheus exporter text into the same
`GpuSample` series, whatever the vendor: utilisation (`gpu.util_percent`), memory
(`gpu.memory_used_mb`, `gpu.memory_free_mb`), temperature (`gpu.temperature_c`), power
(`gpu.power_w`), and the health signals health.py turns into faults (XID, uncorrectable ECC
counts, a device that reports itself unhealthy, a device error code). The metric names are the
vendors' documented ones:

- nvidia: NVIDIA's DCGM exporter (dcgm.py);
- amd: AMD's device-metrics exporter (gpu_gfx_activity, gpu_used_vram, gpu_junction_temperature,
  gpu_package_power, gpu_ecc_uncorrect_total, gpu_health, ...; labels gpu_id, card_model, pod,
  namespace, container; an optional "amd_" prefix is accepted);
- ascend: Ascend's npu-exporter (npu_chip_info_utilization, npu_chip_info_hbm_used_memory,
  npu_chip_info_hbm_total_memory, npu_chip_info_temperature, npu_chip_info_power,
  npu_chip_info_health_status, npu_chip_info_error_code; labels id, model_name, pod_name,
  namespace, container_name).
"""
from __future__ import annotations

import math
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from .dcgm import GpuSample, parse_dcgm
from .health import ERROR_CODE_METRIC, UNHEALTHY_METRIC

# Vendor metric -> (Cairn metric, how the value maps). Several vendor names may feed one Cairn
# metric (MI2xx report edge temperature and average power, MI3xx junction and package power):
# the first one present for a device wins.
AMD_METRICS: dict[str, tuple[str, Callable[[float], float]]] = {
    "gpu_gfx_activity": ("gpu.util_percent", float),
    "gpu_used_vram": ("gpu.memory_used_mb", float),
    "gpu_free_vram": ("gpu.memory_free_mb", float),
    "gpu_junction_temperature": ("gpu.temperature_c", float),
    "gpu_edge_temperature": ("gpu.temperature_c", float),
    "gpu_memory_temperature": ("gpu.memory_temperature_c", float),
    "gpu_package_power": ("gpu.power_w", float),
    "gpu_average_package_power": ("gpu.power_w", float),
    "gpu_power_usage": ("gpu.power_w", float),
    "gpu_ecc_correct_total": ("gpu.ecc_sbe_volatile", float),
    "gpu_ecc_uncorrect_total": ("gpu.ecc_dbe_volatile", float),
    "gpu_health": (UNHEALTHY_METRIC, lambda v: 0.0 if v >= 1 else 1.0),  # 1 healthy, 0 unhealthy
}
ASCEND_METRICS: dict[str, tuple[str, Callable[[float], float]]] = {
    "npu_chip_info_utilization": ("gpu.util_percent", float),
    "npu_chip_info_hbm_used_memory": ("gpu.memory_used_mb", float),
    "npu_chip_info_temperature": ("gpu.temperature_c", float),
    "npu_chip_info_power": ("gpu.power_w", float),
    "npu_chip_info_health_status": (UNHEALTHY_METRIC, lambda v: 0.0 if v >= 1 else 1.0),  # 1 healthy, 0 not
    "npu_chip_info_error_code": (ERROR_CODE_METRIC, float),
}
ASCEND_TOTAL_MEMORY = "npu_chip_info_hbm_total_memory"


def _samples(text: str):
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if math.isfinite(sample.value):
                yield sample


def _device(labels: dict, *keys: str) -> int | None:
    for key in keys:
        try:
            return int(labels[key])
        except (KeyError, ValueError):
            continue
    return None


def parse_amd(text: str, *, node: str) -> list[GpuSample]:
    out: dict[tuple[int, str], GpuSample] = {}
    for s in _samples(text):
        name = s.name.removeprefix("amd_")
        known = AMD_METRICS.get(name) or AMD_METRICS.get(name.removesuffix("_total"))
        gpu = _device(s.labels, "gpu_id", "gpu")
        if known is None or gpu is None:
            continue
        metric, convert = known
        if (gpu, metric) in out:
            continue
        labels = {"model": s.labels.get("card_model") or s.labels.get("card_series", ""),
                  "uuid": s.labels.get("serial_number", "")}
        for key in ("namespace", "pod", "container"):
            if s.labels.get(key):
                labels[key] = s.labels[key]
        out[(gpu, metric)] = GpuSample(node=node, gpu=gpu, metric=metric, value=convert(s.value), labels=labels)
    return list(out.values())


def parse_npu_exporter(text: str, *, node: str) -> list[GpuSample]:
    out: dict[tuple[int, str], GpuSample] = {}
    totals: dict[int, float] = {}
    for s in _samples(text):
        npu = _device(s.labels, "id")
        if npu is None:
            continue
        if s.name == ASCEND_TOTAL_MEMORY:
            totals[npu] = s.value
            continue
        known = ASCEND_METRICS.get(s.name)
        if known is None or (npu, known[0]) in out:
            continue
        labels = {"model": s.labels.get("model_name", ""), "uuid": s.labels.get("vdie_id", "")}
        for key, source in (("namespace", "namespace"), ("pod", "pod_name"), ("container", "container_name")):
            if s.labels.get(source):
                labels[key] = s.labels[source]
        out[(npu, known[0])] = GpuSample(node=node, gpu=npu, metric=known[0], value=known[1](s.value), labels=labels)
    for npu, total in totals.items():  # the exporter gives total and used; Cairn's series are used and free
        used = out.get((npu, "gpu.memory_used_mb"))
        if used is not None:
            out[(npu, "gpu.memory_free_mb")] = GpuSample(node=node, gpu=npu, metric="gpu.memory_free_mb",
                                                          value=max(0.0, total - used.value), labels=used.labels)
    return list(out.values())


PARSERS: dict[str, Callable[..., list[GpuSample]]] = {"nvidia": parse_dcgm, "amd": parse_amd,
                                                     "ascend": parse_npu_exporter}


def parse_exporter(vendor: str, text: str, *, node: str) -> list[GpuSample]:
    """The vendor's exporter text -> GpuSamples; ValueError for an unknown vendor or text that is
    not the Prometheus exposition format."""
    parser = PARSERS.get(vendor or "nvidia")
    if parser is None:
        raise ValueError(f"no exporter parser for accelerator type '{vendor}'")
    return parser(text, node=node)
