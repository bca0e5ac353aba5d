"""The workload spec's `accelerator: {type, model, count}` and `arch` (docs/accelerators.md).

`accelerator` names the vendor's devices a replica needs; today's `resources.gpu` and `gpu_model`
stay as the NVIDIA short form (and are what `accelerator` is stored as: gpu_milli, gpu_model, plus
the type). `arch` is one CPU architecture or a list: the image runs there, and only there."""
from __future__ import annotations

from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.clusters.accelerators import ARCHES, normalise_arch, vendor_label
from apps.clusters.backends import backend_spec
from apps.clusters.choices import AcceleratorType
from apps.core.serializers import StrictSerializer

MAX_DEVICES_PER_REPLICA = 64
# What a workload may ask for (a node's type may also be "none").
VENDOR_CHOICES = [(t, label) for t, label in AcceleratorType.choices if t != AcceleratorType.NONE]


class AcceleratorSerializer(StrictSerializer):
    type = serializers.ChoiceField(choices=VENDOR_CHOICES,
                                   help_text="The vendor: nvidia, amd or ascend.")
    model = serializers.CharField(required=False, default="", allow_blank=True, max_length=100,
                                  help_text="The product, as the nodes name it (A100, MI300X, 910B3); "
                                            "several allowed with '|'. Empty: any model of the type.")
    count = serializers.DecimalField(max_digits=6, decimal_places=3, min_value=Decimal("0.001"),
                                     max_value=MAX_DEVICES_PER_REPLICA, default=1,
                                     help_text="Devices per replica; below 1 shares a device where the cluster "
                                               "has a sharing plugin.")

    def validate_count(self, value):
        if value > 1 and value != int(value):
            raise serializers.ValidationError("Above one device, ask for a whole number of devices.")
        return value


@extend_schema_field({"oneOf": [{"type": "string", "enum": list(ARCHES)},
                                {"type": "array", "items": {"type": "string", "enum": list(ARCHES)}}]})
class ArchField(serializers.Field):
    """One CPU architecture or a list (amd64, arm64; x86_64 and aarch64 are read as those)."""

    def to_internal_value(self, data):
        values = [data] if isinstance(data, str) else data
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise serializers.ValidationError("Give arch as a string or a non-empty list of strings.")
        out = []
        for v in values:
            arch = normalise_arch(v)
            if arch not in ARCHES:
                raise serializers.ValidationError(f"Unknown architecture '{v[:40]}': use {' or '.join(ARCHES)}.")
            if arch not in out:
                out.append(arch)
        return out

    def to_representation(self, value):
        return value


def accelerator_fields(data: dict) -> dict:
    """The Workload columns the accelerator part of validated data becomes (one form or the other)."""
    accel = data.get("accelerator")
    arch = "|".join(data.get("arch") or [])
    if accel:
        return {"gpu_milli": int(accel["count"] * 1000), "gpu_model": accel.get("model", ""),
                "accelerator_type": accel["type"], "arch": arch}
    return {"accelerator_type": "", "arch": arch}  # "": NVIDIA if it asks for GPUs (the short form)


def check_accelerator(data: dict, pool) -> None:
    """What needs both forms and the pool: one form only; the pool offers the type and arch; a
    shared device needs a sharing plugin on Kubernetes. Raises ValidationError (400)."""
    accel = data.get("accelerator")
    resources = data.get("resources") or {}
    if accel and (resources.get("gpu") or data.get("gpu_model")):
        raise serializers.ValidationError({"accelerator": [
            "Give the accelerator either as `accelerator` or as `resources.gpu`/`gpu_model` (the NVIDIA short "
            "form), not both."]})
    kind = accel["type"] if accel else (AcceleratorType.NVIDIA if resources.get("gpu") else AcceleratorType.NONE)
    offered = pool.accelerator_types or []
    if offered and kind != AcceleratorType.NONE and kind not in offered:
        raise serializers.ValidationError({"accelerator": [
            f"Pool '{pool.name}' offers {', '.join(vendor_label(t) for t in offered)} accelerators, not "
            f"{vendor_label(kind)}."]})
    arches = data.get("arch") or []
    if arches and pool.architectures and not set(arches) & set(pool.architectures):
        raise serializers.ValidationError({"arch": [
            f"Pool '{pool.name}' has {' and '.join(pool.architectures)} nodes only."]})
    if accel and accel["count"] < 1 and not backend_spec(pool.cluster.backend).shared_accelerators(pool.cluster, kind):
        raise serializers.ValidationError({"accelerator": [
            f"Cluster '{pool.cluster.name}' has no sharing plugin for {vendor_label(kind)} devices "
            "(config.accelerators." + kind + ".shared_resources): ask for whole devices."]})
