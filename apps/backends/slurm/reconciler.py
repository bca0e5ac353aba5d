"""The Slurm reconciler: every pass keeps each Slurm cluster's Node rows in line with `sinfo`
(CPUs, memory, GPUs as GRES, drained or down nodes unschedulable), then reconciles the clusters'
workloads through the shared steps of apps.backends.services (dispatch when the task was lost,
stop escalation, gang failures, restarts), observing jobs with squeue and ranks by exit file."""
from __future__ import annotations

import logging
import re
import threading

from django.db import close_old_connections, connection
from django.utils import timezone

from apps.backends.base import TransientBackendError
from apps.backends.services import reconcile_workloads
from apps.clusters.choices import AcceleratorType, NodeHealth
from apps.clusters.models import Cluster, Node, ResourcePool
from apps.core.heartbeat import heartbeat
from apps.workloads.models import Workload

from . import SPEC
from .client import SlurmClient

logger = logging.getLogger(__name__)
UNSCHEDULABLE = ("down", "drain", "drained", "draining", "fail", "failing", "future", "maint", "not_responding",
                 "unknown", "invalid", "power_down", "powered_down", "reboot_requested")


def node_inventory(node: dict) -> dict:
    """A Node row's fields from one node of `sinfo --json` (pure). GRES "gpu:h100:2" (or "gpu:2")
    are the node's GPUs; the model is the GRES type."""
    gpus, model = 0, ""
    for gres in (node.get("gres") or "").split(","):
        match = re.match(r"^gpu(?::([^:(]+))?:(\d+)", gres.strip())
        if match:
            gpus += int(match.group(2))
            model = model or (match.group(1) or "")
    state = " ".join([str(node.get("state") or ""), *map(str, node.get("state_flags") or [])]).lower()
    down = any(word in state for word in UNSCHEDULABLE)
    cpu_milli = int(node.get("cpus") or 0) * 1000
    memory_mb = int(node.get("real_memory") or 0)
    return {
        "cpu_milli_capacity": cpu_milli, "cpu_milli_allocatable": cpu_milli,
        "memory_mb_capacity": memory_mb, "memory_mb_allocatable": memory_mb,
        "gpu_count": gpus, "gpu_model": model,
        "accelerator_type": AcceleratorType.NVIDIA if gpus else AcceleratorType.NONE,
        "schedulable": not down, "health": NodeHealth.UNHEALTHY if down else NodeHealth.HEALTHY,
    }


def sync_nodes(cluster: Cluster, client: SlurmClient) -> dict[str, int]:
    """Make the cluster's Node rows match Slurm's nodes (of its partition, when one is set)."""
    partition = (cluster.config or {}).get("partition")
    seen, counts, now = set(), {"created": 0, "updated": 0, "removed": 0}, timezone.now()
    pools = list(ResourcePool.objects.filter(cluster=cluster))
    existing = {node.name: node for node in Node.objects.filter(cluster=cluster)}
    for found in client.nodes():
        name = found.get("name")
        if not name or (partition and partition not in (found.get("partitions") or [])):
            continue
        seen.add(name)
        fields = node_inventory(found)
        node = existing.get(name)
        if node is None:
            Node.objects.create(cluster=cluster, name=name, pool=pools[0] if len(pools) == 1 else None,
                                last_seen_at=now, **fields)
            counts["created"] += 1
            continue
        if node.cordon_reason:  # Cairn's own cordon outlives Slurm's state
            fields["schedulable"] = False
        changed = [f for f, v in fields.items() if getattr(node, f) != v]
        for f in changed:
            setattr(node, f, fields[f])
        if node.pool_id is None and len(pools) == 1:
            node.pool = pools[0]
            changed.append("pool")
        node.last_seen_at = now
        node.save(update_fields=[*changed, "last_seen_at"])
        counts["updated"] += bool(changed)
    gone = [node.pk for name, node in existing.items() if name not in seen]
    if gone:
        counts["removed"] = Node.objects.filter(pk__in=gone).delete()[0]
    return counts


def reconcile_once() -> int:
    """One pass over every Slurm cluster: nodes, then workloads. Returns how many workloads it acted on."""
    acted = 0
    for cluster in Cluster.objects.filter(backend=SPEC.name):
        try:
            sync_nodes(cluster, SlurmClient(cluster.config or {}))
        except TransientBackendError as exc:
            logger.warning("slurm reconciler: cluster %s: %s (next pass)", cluster.name, exc)
            continue
        acted += reconcile_workloads(Workload.objects.filter(pool__cluster=cluster), key=f"slurm-{cluster.pk}")
    return acted


def run_slurm_reconciler(stop: threading.Event, interval: float) -> None:
    """Reconcile every Slurm cluster every `interval` seconds until `stop`."""
    logger.info("slurm reconciler: started (interval %gs)", interval)
    try:
        while not stop.is_set():
            close_old_connections()
            try:
                acted = reconcile_once()
                if acted:
                    logger.info("slurm reconciler: acted on %s workload(s)", acted)
            except Exception:
                logger.exception("slurm reconciler: pass failed; retrying in %gs", interval)
            heartbeat("reconciler-slurm")
            stop.wait(interval)
    finally:
        connection.close()
        logger.info("slurm reconciler: stopped")
