"""System metrics of the training machine, logged into the run every few seconds:
CPU and memory (psutil, when installed) and, when NVIDIA GPUs are present (nvidia-ml-py),
utilisation, memory, temperature and power per GPU. Keys: system/cpu_percent,
system/gpu0/util_percent, ... Failing sources are skipped, never raised."""
from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger("cairn.tracking")


def load_nvml() -> Any | None:
    """The pynvml module, initialised, or None when there is no NVIDIA driver / GPU."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return None
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    return pynvml


def gpu_sample(nvml: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        prefix = f"system/gpu{index}"
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # noqa: BLE001
            continue
        readers = {
            "util_percent": lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu,
            "memory_used_mb": lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used / 2**20,
            "memory_percent": lambda h: 100.0 * nvml.nvmlDeviceGetMemoryInfo(h).used / nvml.nvmlDeviceGetMemoryInfo(h).total,
            "temperature_c": lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "power_w": lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        }
        for name, read in readers.items():
            try:
                out[f"{prefix}/{name}"] = float(read(handle))
            except Exception:  # noqa: BLE001 - a field not supported on this GPU
                continue
    return out


def host_sample(psutil: Any) -> dict[str, float]:
    memory = psutil.virtual_memory()
    return {
        "system/cpu_percent": float(psutil.cpu_percent(interval=None)),
        "system/memory_percent": float(memory.percent),
        "system/memory_used_mb": float(memory.used) / 2**20,
    }


class SystemSampler:
    def __init__(self, run, *, interval: float = 5.0, nvml: Any | None = None, psutil: Any | None = None):
        self.run = run
        self.interval = interval
        self._nvml = nvml
        self._psutil = psutil
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cairn-system-metrics", daemon=True)
        self.samples = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sample(self) -> dict[str, float]:
        values: dict[str, float] = {}
        if self._psutil is not None:
            try:
                values.update(host_sample(self._psutil))
            except Exception:  # noqa: BLE001
                pass
        if self._nvml is not None:
            values.update(gpu_sample(self._nvml))
        return values

    def _loop(self) -> None:
        if self._psutil is None:
            try:
                import psutil

                self._psutil = psutil
                psutil.cpu_percent(interval=None)  # the first call only primes the counter
            except ImportError:
                pass
        if self._nvml is None:
            self._nvml = load_nvml()
        while not self._stop.wait(self.interval):
            values = self.sample()
            if values:
                self.run.sender.add_points([(k, self.samples, v, _now()) for k, v in values.items()])
                self.samples += 1


def _now() -> float:
    import time

    return time.time()
