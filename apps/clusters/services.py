"""Writes to clusters, pools and nodes."""
import logging
import socket
from dataclasses import dataclass

import psutil
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .choices import Backend, NodeHealth
from .models import Cluster, Node, ResourcePool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuInventory:
    count: int = 0
    model: str = ""
    memory_mb: int = 0


def local_gpu_inventory() -> GpuInventory:
    """GPUs of this machine through NVML; none when there is no NVIDIA driver (never raises)."""
    try:
        import pynvml
    except ImportError:
        return GpuInventory()
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver / library: a CPU-only machine
        return GpuInventory()
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return GpuInventory()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        if isinstance(name, bytes):
            name = name.decode()
        memory_mb = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
        return GpuInventory(count=count, model=name, memory_mb=int(memory_mb))
    except Exception as exc:
        logger.warning("NVML is present but could not list the GPUs: %s", exc)
        return GpuInventory()
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def local_cluster_register() -> Node:
    """Make sure the local cluster, its pool and this machine's node exist and are current.

    Get-or-creates the Cluster (backend local) and ResourcePool named in settings.CAIRN and the
    Node named after this host, with CPU, memory and GPUs measured now; marks it healthy and seen.
    An admin's choices (pool of the node, schedulable, labels) are left alone.
    """
    cpu_milli = (psutil.cpu_count(logical=True) or 1) * 1000
    memory_mb = psutil.virtual_memory().total // (1024 * 1024)
    gpus = local_gpu_inventory()
    now = timezone.now()
    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(
            name=settings.CAIRN["LOCAL_CLUSTER_NAME"], defaults={"backend": Backend.LOCAL}
        )
        pool, _ = ResourcePool.objects.get_or_create(
            name=settings.CAIRN["LOCAL_POOL_NAME"],
            defaults={"cluster": cluster, "description": "This machine."},
        )
        measured = {
            "cpu_milli_capacity": cpu_milli,
            "cpu_milli_allocatable": cpu_milli,
            "memory_mb_capacity": memory_mb,
            "memory_mb_allocatable": memory_mb,
            "gpu_count": gpus.count,
            "gpu_model": gpus.model,
            "gpu_memory_mb": gpus.memory_mb,
            "health": NodeHealth.HEALTHY,
        }
        node, created = Node.objects.select_for_update().get_or_create(
            cluster=cluster, name=socket.gethostname(),
            defaults={**measured, "pool": pool, "last_seen_at": now},
        )
        if not created:
            changed = [field for field, value in measured.items() if getattr(node, field) != value]
            for field in changed:
                setattr(node, field, measured[field])
            if changed:
                logger.info("node %s: updated %s", node, ", ".join(changed))
            node.last_seen_at = now
            node.save(update_fields=[*changed, "last_seen_at"])
    return node
