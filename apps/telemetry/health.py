"""GPU faults in telemetry: new XID errors and new uncorrectable (double-bit) ECC errors. Pure.

DCGM reports, per GPU, the code of the last XID error (0 until one happens, kept until the driver
is reloaded) and counters of double-bit ECC errors (volatile: since the driver was loaded;
aggregate: over the GPU's life). A fault is *new* when the value differs from the previous sample
of the same GPU, so a code or count that stays the same is reported once."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

XID_METRIC = "gpu.xid_last"
ECC_VOLATILE = "gpu.ecc_dbe_volatile"
ECC_AGGREGATE = "gpu.ecc_dbe_aggregate"
# Other vendors (exporters.py): 1 while a device reports itself unhealthy (AMD gpu_health, Ascend
# npu_chip_info_health_status), and a device's last error code (Ascend npu_chip_info_error_code).
UNHEALTHY_METRIC = "gpu.unhealthy"
ERROR_CODE_METRIC = "gpu.error_code"
HEALTH_METRICS = (XID_METRIC, ECC_VOLATILE, ECC_AGGREGATE, UNHEALTHY_METRIC, ERROR_CODE_METRIC)

XID_ERROR = "GpuXidError"
ECC_ERROR = "GpuEccError"
UNHEALTHY = "GpuUnhealthy"
ERROR_CODE = "GpuErrorCode"
REASONS = {XID_METRIC: XID_ERROR, ECC_VOLATILE: ECC_ERROR, ECC_AGGREGATE: ECC_ERROR, UNHEALTHY_METRIC: UNHEALTHY,
           ERROR_CODE_METRIC: ERROR_CODE}

# What the common hardware XIDs mean (NVIDIA's XID catalogue), for event messages.
XID_MEANINGS = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping event",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


@dataclass(frozen=True)
class GpuFault:
    node: str
    gpu: int
    reason: str  # XID_ERROR | ECC_ERROR
    metric: str
    value: float
    previous: float | None

    @property
    def message(self) -> str:
        if self.reason == XID_ERROR:
            code = int(self.value)
            meaning = XID_MEANINGS.get(code)
            return f"GPU {self.gpu} reported XID {code}" + (f" ({meaning})" if meaning else "") + "."
        if self.reason == UNHEALTHY:
            return f"Device {self.gpu} reports itself unhealthy."
        if self.reason == ERROR_CODE:
            return f"Device {self.gpu} reported error code {int(self.value)} (0x{int(self.value):X})."
        kind = "volatile" if self.metric == ECC_VOLATILE else "aggregate"
        before = 0 if self.previous is None else int(self.previous)
        return (f"GPU {self.gpu} reported {int(self.value) - before} new uncorrectable ECC error(s) "
                f"({kind} double-bit count {before} -> {int(self.value)}).")


def _bad(metric: str, value: float, ignored_xids: frozenset[int]) -> bool:
    if metric == XID_METRIC:
        return value != 0 and int(value) not in ignored_xids
    if metric == ERROR_CODE_METRIC:
        return value != 0
    return value > 0


def detect_gpu_faults(
    samples: Iterable, *, previous: dict[tuple, float], recorded: dict[tuple, float],
    ignored_xids: Iterable[int] = (),
) -> list[GpuFault]:
    """The new faults among `samples` (objects with node, gpu, metric, value, time).

    `previous`: (node, gpu, metric) -> the GPU's latest earlier value, when there is a recent one.
    `recorded`: (node, gpu, metric) -> the value of the latest fault already recorded, used when
    there is no recent sample to compare with (after a gap): an XID code or volatile count that
    was already reported is not reported again. A lifetime (aggregate) count seen for the first
    time is a baseline, not a fault: those errors may be long repaired."""
    ignored = frozenset(int(x) for x in ignored_xids)
    last = dict(previous)
    faults = []
    for s in sorted(samples, key=lambda s: s.time):
        if s.metric not in HEALTH_METRICS or s.gpu is None:
            continue
        key = (s.node, s.gpu, s.metric)
        before = last.get(key)
        last[key] = s.value
        if not _bad(s.metric, s.value, ignored):
            continue
        if before is not None:
            # A volatile count that dropped was reset with the driver: errors since then are new.
            new = s.value > before if s.metric == ECC_AGGREGATE else s.value != before
        elif s.metric == ECC_AGGREGATE:
            new = False
        else:
            new = recorded.get(key) != s.value
        if new:
            faults.append(GpuFault(node=s.node, gpu=s.gpu, reason=REASONS[s.metric], metric=s.metric, value=s.value,
                                   previous=before))
    return faults
