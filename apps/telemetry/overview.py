"""The cluster overview (the dashboard's cluster page and node x GPU heatmap, docs/live.md): pools
and nodes (clusters) with what active workloads hold (workloads) and the latest use (telemetry).
Here, in the observability layer, because it reads all three."""
from datetime import datetime, timedelta

from django.utils import timezone

from apps.clusters.choices import ISOLATION_LABEL, NETWORK_LABEL
from apps.clusters.models import Node, ResourcePool
from apps.workloads.choices import ACTIVE
from apps.workloads.models import Workload

from .conf import setting as telemetry_setting
from .selectors import telemetry_latest

GPU_METRICS = ("gpu.util_percent", "gpu.memory_used_mb", "gpu.memory_free_mb", "gpu.temperature_c", "gpu.power_w")
NODE_METRICS = ("node.cpu_percent", "node.memory_percent")
BUSY_UTIL_PERCENT = 1.0  # a GPU at or above this utilisation counts as used


def _allocations(workloads) -> dict:
    """(cluster_id, node name) -> {"gpu": milli, "cpu": milli, "mem": MiB, "gpus": {index: milli}, "whole": n}
    from the placements of active workloads (one entry per replica; see apps.scheduling.policy)."""
    out: dict = {}
    for cluster_id, placement, gpu_milli, cpu_milli, memory_mb in workloads:
        for entry in placement or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("node"), str):
                continue
            a = out.setdefault((cluster_id, entry["node"]), {"gpu": 0, "cpu": 0, "mem": 0, "gpus": {}, "unindexed": 0})
            a["gpu"] += gpu_milli
            a["cpu"] += cpu_milli
            a["mem"] += memory_mb
            indices = [i for i in entry.get("gpus") or [] if isinstance(i, int) and not isinstance(i, bool) and i >= 0]
            if gpu_milli and indices:
                per_gpu = min(gpu_milli, 1000)  # a fraction of one GPU, or whole GPUs
                for index in indices:
                    a["gpus"][index] = a["gpus"].get(index, 0) + per_gpu
            elif gpu_milli:
                a["unindexed"] += -(-gpu_milli // 1000)
    return out


def cluster_overview(*, now: datetime | None = None) -> dict:
    """Pools and their nodes with capacity, allocation (placements of admitted, running and
    stopping workloads) and use (the latest telemetry), per GPU for the heatmap. Four queries,
    whatever the size of the cluster."""
    now = now or timezone.now()
    max_age = int(telemetry_setting("TELEMETRY_LATEST_MAX_AGE"))
    pools = list(ResourcePool.objects.select_related("cluster").order_by("name"))
    nodes = list(Node.objects.select_related("cluster").order_by("cluster__name", "name"))
    allocations = _allocations(Workload.objects.filter(status__in=ACTIVE).values_list(
        "pool__cluster_id", "placement", "gpu_milli", "cpu_milli", "memory_mb"))
    latest = telemetry_latest(metrics=(*GPU_METRICS, *NODE_METRICS), since=now - timedelta(seconds=max_age))
    by_node: dict[str, dict] = {}
    for (name, gpu, metric), sample in latest.items():
        by_node.setdefault(name, {}).setdefault(gpu, {})[metric] = sample

    def iso(value):
        return value.isoformat().replace("+00:00", "Z") if value else None

    def node_row(node: Node) -> dict:
        alloc = allocations.get((node.cluster_id, node.name), {"gpu": 0, "cpu": 0, "mem": 0, "gpus": {}, "unindexed": 0})
        seen = by_node.get(node.name, {})
        gpus = []
        for index in sorted(set(range(node.gpu_count)) | {g for g in seen if g is not None}):
            metrics = seen.get(index, {})

            def value(metric, metrics=metrics):
                return metrics[metric][1] if metric in metrics else None

            used, free = value("gpu.memory_used_mb"), value("gpu.memory_free_mb")
            total = used + free if used is not None and free is not None else (
                float(node.gpu_memory_mb) if node.gpu_memory_mb else None)
            gpus.append({
                "index": index, "allocated_milli": alloc["gpus"].get(index, 0),
                "util_percent": value("gpu.util_percent"), "memory_used_mb": used, "memory_total_mb": total,
                "temperature_c": value("gpu.temperature_c"), "power_w": value("gpu.power_w"),
                "time": iso(max((t for t, _ in metrics.values()), default=None)),
            })
        utils = [g["util_percent"] for g in gpus if g["util_percent"] is not None]
        node_level = seen.get(None, {})
        times = [t for metrics in seen.values() for t, _ in metrics.values()]
        allocated_gpus = sum(1 for milli in alloc["gpus"].values() if milli > 0) + alloc["unindexed"]
        return {
            "id": node.pk, "name": node.name, "cluster": node.cluster.name, "gpu_model": node.gpu_model,
            "accelerator_type": node.accelerator_type, "cpu_arch": node.cpu_arch,
            "gpu_count": node.gpu_count, "gpu_memory_mb": node.gpu_memory_mb, "health": node.health,
            "schedulable": node.schedulable, "cordoned": not node.schedulable, "last_seen_at": iso(node.last_seen_at),
            "capacity_gpu_milli": node.gpu_count * 1000, "allocated_gpu_milli": alloc["gpu"],
            "used_gpu_milli": round(sum(min(max(u, 0.0), 100.0) * 10 for u in utils)),
            "allocated_gpus": min(allocated_gpus, max(node.gpu_count, len(alloc["gpus"]))),
            "used_gpus": sum(1 for u in utils if u >= BUSY_UTIL_PERCENT),
            "cpu_milli_allocatable": node.cpu_milli_allocatable, "allocated_cpu_milli": alloc["cpu"],
            "memory_mb_allocatable": node.memory_mb_allocatable, "allocated_memory_mb": alloc["mem"],
            "others_gpu_milli": node.others_gpu_milli, "others_cpu_milli": node.others_cpu_milli,
            "others_memory_mb": node.others_memory_mb,
            "cpu_percent": node_level["node.cpu_percent"][1] if "node.cpu_percent" in node_level else None,
            "memory_percent": node_level["node.memory_percent"][1] if "node.memory_percent" in node_level else None,
            "telemetry_time": iso(max(times, default=None)),
            "replica_isolation": (node.labels or {}).get(ISOLATION_LABEL),
            "replica_network": (node.labels or {}).get(NETWORK_LABEL),
            "gpus": gpus,
        }

    rows_by_pool: dict[int | None, list[dict]] = {}
    models_by_pool: dict[int | None, set[str]] = {}
    for node in nodes:
        rows_by_pool.setdefault(node.pool_id, []).append(node_row(node))
        if node.gpu_model:
            models_by_pool.setdefault(node.pool_id, set()).add(node.gpu_model)
    out_pools = []
    for pool in pools:
        rows = rows_by_pool.get(pool.pk, [])
        out_pools.append({
            "name": pool.name, "cluster": pool.cluster.name, "description": pool.description,
            "accelerator_models": list(pool.accelerator_models or sorted(models_by_pool.get(pool.pk, set()))),
            "accelerator_types": list(pool.accelerator_types or sorted(
                {r["accelerator_type"] for r in rows if r["accelerator_type"] != "none"})),
            "architectures": list(pool.architectures or sorted({r["cpu_arch"] for r in rows if r["cpu_arch"]})),
            "nodes_total": len(rows), "nodes_schedulable": sum(1 for r in rows if r["schedulable"]),
            **{key: sum(r[key] for r in rows) for key in (
                "capacity_gpu_milli", "allocated_gpu_milli", "used_gpu_milli", "allocated_gpus", "used_gpus",
                "cpu_milli_allocatable", "allocated_cpu_milli", "memory_mb_allocatable", "allocated_memory_mb")},
            "capacity_gpus": sum(r["gpu_count"] for r in rows),
            "nodes": rows,
        })
    return {"generated_at": iso(now), "telemetry_max_age_seconds": max_age, "pools": out_pools,
            "unpooled_nodes": rows_by_pool.get(None, [])}
