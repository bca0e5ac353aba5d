"""Accelerator vendors: what Cairn needs to know of each (pure; docs/accelerators.md).

Per vendor: its name for people and for one device ("NVIDIA" GPU, "Ascend" NPU), the Kubernetes
extended resource its device plugin advertises, the resources of a fractional-sharing plugin
where one exists (HAMi's, for example), and the node labels that name the product and its memory.
A cluster may override any of these in `Cluster.config["accelerators"][<vendor>]`; the NVIDIA
entry also keeps reading the older `gpu_resource`, `shared_gpu_resources` and `gpu_product_label`
keys. CPU architectures are Kubernetes' names (`kubernetes.io/arch`); `normalise_arch` maps the
names other tools print (x86_64, aarch64) onto them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .choices import AcceleratorType, CpuArch

ARCH_LABEL = "kubernetes.io/arch"
# Units of a sharing resource: "one" (1 per replica), "percent" (of one device), "milli".
SHARE_UNITS = ("one", "percent", "milli")

_ARCH_ALIASES = {"x86_64": "amd64", "x86-64": "amd64", "x64": "amd64", "amd64": "amd64",
                 "aarch64": "arm64", "arm64": "arm64", "armv8": "arm64", "arm64v8": "arm64"}


def normalise_arch(value: str) -> str:
    """Kubernetes' name of a CPU architecture ("x86_64" -> "amd64"); "" when unknown."""
    return _ARCH_ALIASES.get((value or "").strip().lower(), "")


@dataclass(frozen=True)
class Vendor:
    type: str  # an AcceleratorType value
    label: str  # for people: "NVIDIA", "AMD", "Ascend"
    device: str  # one device: "GPU", "NPU"
    resource: str  # the device plugin's extended resource (whole devices)
    product_labels: tuple[str, ...] = ()  # node labels naming the model, first found wins
    memory_label: str = ""  # node label with the device memory (MiB, or a quantity like "64G")
    # Fractional sharing: resource name -> unit (SHARE_UNITS); empty: whole devices only.
    shared_resources: dict[str, str] = field(default_factory=dict)


VENDORS: dict[str, Vendor] = {
    AcceleratorType.NVIDIA: Vendor(
        type=AcceleratorType.NVIDIA, label="NVIDIA", device="GPU", resource="nvidia.com/gpu",
        product_labels=("nvidia.com/gpu.product",), memory_label="nvidia.com/gpu.memory",
        # The NVIDIA device plugin's time-slicing shares a GPU as "one"; HAMi adds
        # nvidia.com/gpucores (percent) and nvidia.com/gpumem (configure them per cluster).
        shared_resources={"nvidia.com/gpu": "one"},
    ),
    AcceleratorType.AMD: Vendor(
        type=AcceleratorType.AMD, label="AMD", device="GPU", resource="amd.com/gpu",
        # AMD's node labeller.
        product_labels=("amd.com/gpu.product-name", "beta.amd.com/gpu.product-name", "amd.com/gpu.family"),
        memory_label="amd.com/gpu.vram",
    ),
    AcceleratorType.ASCEND: Vendor(
        type=AcceleratorType.ASCEND, label="Ascend", device="NPU", resource="huawei.com/Ascend910",
        # Ascend's device plugin names the chip in `node.kubernetes.io/npu.chip.name` on recent
        # releases and `accelerator` (huawei-Ascend910) on all of them.
        product_labels=("node.kubernetes.io/npu.chip.name", "accelerator"),
        # HAMi's Ascend plugin: a slice of an NPU is asked for as 1 device plus its memory and
        # cores (huawei.com/Ascend910B3-memory / -core); configure them per cluster.
    ),
}
ARCHES = tuple(CpuArch.values)


def vendor(type_: str) -> Vendor | None:
    return VENDORS.get(type_)


def vendor_label(type_: str) -> str:
    v = VENDORS.get(type_)
    return v.label if v else "no accelerator"


def vendors_for_cluster(config: dict | None, *, nvidia_defaults: dict | None = None) -> dict[str, Vendor]:
    """The vendors with a cluster's overrides applied.

    `config`: Cluster.config. Its `accelerators` maps a vendor to any of `resource`,
    `shared_resources`, `product_label`; the NVIDIA entry falls back to `gpu_resource`,
    `shared_gpu_resources`, `gpu_product_label` (cluster first, then `nvidia_defaults`, the
    deployment's settings with the same keys)."""
    config = config or {}
    base = {k: v for k, v in (nvidia_defaults or {}).items() if v}
    legacy = {**base, **{k: config[k] for k in ("gpu_resource", "shared_gpu_resources", "gpu_product_label")
                         if config.get(k)}}
    out = {}
    for key, v in VENDORS.items():
        over = dict((config.get("accelerators") or {}).get(key) or {})
        if key == AcceleratorType.NVIDIA:
            over.setdefault("resource", legacy.get("gpu_resource"))
            over.setdefault("shared_resources", legacy.get("shared_gpu_resources"))
            over.setdefault("product_label", legacy.get("gpu_product_label"))
        changes = {}
        if over.get("resource"):
            changes["resource"] = over["resource"]
        if over.get("shared_resources") is not None:
            changes["shared_resources"] = dict(over["shared_resources"])
        if over.get("product_label"):
            changes["product_labels"] = (over["product_label"], *[p for p in v.product_labels
                                                                   if p != over["product_label"]])
        out[key] = replace(v, **changes)
    return out


def check_accelerators_config(value) -> str | None:
    """What is wrong with a cluster's `accelerators` config (None: nothing)."""
    if not isinstance(value, dict):
        return "config.accelerators maps a vendor (nvidia, amd, ascend) to its resource names."
    for key, entry in value.items():
        if key not in VENDORS:
            return f"config.accelerators: unknown vendor '{str(key)[:40]}' (nvidia, amd or ascend)."
        if not isinstance(entry, dict) or set(entry) - {"resource", "shared_resources", "product_label"}:
            return (f"config.accelerators.{key} takes resource, shared_resources and product_label.")
        for name in ("resource", "product_label"):
            if name in entry and not (isinstance(entry[name], str) and entry[name]):
                return f"config.accelerators.{key}.{name} must be a non-empty string."
        shared = entry.get("shared_resources", {})
        if not isinstance(shared, dict) or not all(isinstance(k, str) and u in SHARE_UNITS for k, u in shared.items()):
            return (f'config.accelerators.{key}.shared_resources maps resource names to "one", "percent" '
                    'or "milli".')
    return None
