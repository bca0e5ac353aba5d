"""Writes of telemetry: storing samples (local sampler, DCGM scrapes), retention with rollups."""
from __future__ import annotations

import logging
import re
import socket
import threading
import time
import urllib.request
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, Max, Min, Sum
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from apps.clusters.choices import NodeHealth
from apps.clusters.models import Node
from apps.clusters.services import node_cordon
from apps.core.realtime import project_group, publish
from apps.deployments.metrics import ServeSample
from apps.workloads.models import Workload

from .conf import setting
from .events import NODES_GROUP, nodes_event, samples_event, workload_samples_event, workload_telemetry_group
from .exporters import parse_exporter
from .health import HEALTH_METRICS, detect_gpu_faults
from .models import NodeHealthEvent, TelemetryRollup, TelemetrySample
from .selectors import telemetry_latest

logger = logging.getLogger(__name__)

POD_WORKLOAD = re.compile(r"^cairn-(\d+)(?:-|$)")  # pods are named from the workload id (backends/kubernetes)


def workload_from_pod(pod: str | None) -> int | None:
    match = POD_WORKLOAD.match(pod or "")
    return int(match.group(1)) if match else None


# node -> time.monotonic() of its last live publication (per process; see _publishable).
_published_at: dict[str, float] = {}
_published_lock = threading.Lock()


def _publishable(samples: list[TelemetrySample]) -> list[TelemetrySample]:
    """The samples of nodes not published in the last TELEMETRY_PUBLISH_MIN_INTERVAL seconds:
    storage keeps everything, the dashboard's cluster stream gets at most one batch per node per
    interval (a misbehaving exporter cannot flood every open cluster page)."""
    interval = float(setting("TELEMETRY_PUBLISH_MIN_INTERVAL"))
    now = time.monotonic()
    allowed: set[str] = set()
    with _published_lock:
        for node in {s.node for s in samples}:
            if now - _published_at.get(node, float("-inf")) >= interval:
                _published_at[node] = now
                allowed.add(node)
        if len(_published_at) > 100_000:  # node names from the wire: keep the map bounded
            _published_at.clear()
    return [s for s in samples if s.node in allowed]


def telemetry_record(*, samples: list[TelemetrySample], of_nodes: bool = True) -> list[TelemetrySample]:
    """Store samples in bulk, act on GPU faults they show (telemetry_check_health), and publish
    them after commit: every node's to NODES_GROUP (throttled per node; not when `of_nodes` is
    False: samples measured elsewhere than on a node, like the gateway's), each workload's to its
    telemetry group and to its project's events group."""
    if not samples:
        return []
    ids = {s.workload_id for s in samples if s.workload_id}
    known = dict(Workload.objects.filter(pk__in=ids).values_list("pk", "project_id")) if ids else {}
    for sample in samples:
        if sample.workload_id and sample.workload_id not in known:
            sample.workload_id = None  # a pod we do not know (or a deleted workload)
    with transaction.atomic():
        try:
            with transaction.atomic():  # a savepoint: a failed check never loses the samples
                telemetry_check_health(samples=samples)
        except Exception:  # noqa: BLE001 - health checks are best effort; storing samples is not
            logger.exception("telemetry: the GPU health check failed")
        TelemetrySample.objects.bulk_create(samples, batch_size=2000)
        live = _publishable(samples) if of_nodes else []
        if live:
            publish(NODES_GROUP, nodes_event(live))
        by_workload: dict[int, list] = {}
        for sample in samples:
            if sample.workload_id:
                by_workload.setdefault(sample.workload_id, []).append(sample)
        by_project: dict[int, list] = {}
        for workload_id, mine in by_workload.items():
            publish(workload_telemetry_group(workload_id), workload_samples_event(workload_id, mine))
            by_project.setdefault(known[workload_id], []).extend(mine)
        for project_id, mine in by_project.items():
            publish(project_group(project_id), samples_event(mine))
    return samples


def telemetry_record_serving(*, samples: list[ServeSample]) -> list[TelemetrySample]:
    """The gateway's request metrics of deployments (apps.deployments.metrics), stored as samples
    of each deployment (node: the gateway process that measured them) and drawn live on its page."""
    now = timezone.now()
    # A deployment deleted since (its last window's zeros come after it) would fail the whole batch.
    known = set(Workload.objects.filter(pk__in={s.workload_id for s in samples}).values_list("pk", flat=True))
    return telemetry_record(of_nodes=False, samples=[
        TelemetrySample(time=now, node=s.node[:253], gpu=None, workload_id=s.workload_id, metric=s.metric[:64],
                        value=s.value) for s in samples if s.workload_id in known])


def telemetry_check_health(*, samples: list[TelemetrySample]) -> list[NodeHealthEvent]:
    """Record new GPU faults among `samples` (new XID errors, new uncorrectable ECC errors; see
    health.py) before they are stored, and cordon the nodes they happened on (marked unhealthy,
    so the scheduler places nothing new there; running workloads keep running). Each cordon is
    published on the dashboard's cluster topic. Costs no query unless a GPU reports a fault value."""

    candidates = [s for s in samples if s.metric in HEALTH_METRICS and s.gpu is not None and s.value != 0]
    if not candidates:
        return []
    nodes = {s.node for s in candidates}
    earliest = min(s.time for s in candidates)
    window = timedelta(seconds=max(15 * 60, 3 * float(setting("TELEMETRY_INTERVAL"))))
    previous = {key: value for key, (_, value) in telemetry_latest(
        metrics=HEALTH_METRICS, nodes=nodes, since=earliest - window, before=earliest).items()}
    recorded: dict[tuple, float] = {}
    for name, gpu, metric, value in (NodeHealthEvent.objects.filter(node_name__in=nodes)
                                     .order_by("created_at", "id").values_list("node_name", "gpu", "metric", "value")):
        recorded[(name, gpu, metric)] = value  # the latest wins
    faults = detect_gpu_faults(candidates, previous=previous, recorded=recorded,
                               ignored_xids=setting("TELEMETRY_XID_IGNORED"))
    if not faults:
        return []
    rows: dict[str, list[Node]] = {}
    for node in Node.objects.filter(name__in={f.node for f in faults}).select_related("cluster", "pool"):
        rows.setdefault(node.name, []).append(node)  # names are unique per cluster only: all of them
    cordon = setting("TELEMETRY_FAULT_CORDON")
    events = []
    for name in sorted({f.node for f in faults}):
        mine = [f for f in faults if f.node == name]
        cordoned: set[int] = set()
        for node in rows.get(name, []):
            if cordon:
                was_schedulable = node.schedulable
                more = f" (and {len(mine) - 1} more fault(s))" if len(mine) > 1 else ""
                node_cordon(node=node, reason=mine[0].reason, health=NodeHealth.UNHEALTHY,
                            message=f"{mine[0].message}{more} Node cordoned.")
                if was_schedulable:
                    cordoned.add(node.pk)
        for fault in mine:
            for node in rows.get(name) or [None]:
                events.append(NodeHealthEvent(
                    node=node, node_name=name, gpu=fault.gpu, reason=fault.reason, metric=fault.metric,
                    value=fault.value, previous=fault.previous, message=fault.message,
                    cordoned=node is not None and node.pk in cordoned and fault is mine[0],
                ))
        logger.warning("telemetry: GPU fault(s) on %s: %s", name, "; ".join(f.message for f in mine))
    NodeHealthEvent.objects.bulk_create(events)
    return events


def telemetry_ingest_exporter(*, node: str, text: str, vendor: str = "nvidia",
                              at: datetime | None = None) -> list[TelemetrySample]:
    """Store one scrape of a vendor's exporter (exporters.py: DCGM, AMD device-metrics, Ascend
    npu-exporter) as the same series; faults from any vendor cordon the node (telemetry_check_health)."""
    at = at or timezone.now()
    samples = [
        TelemetrySample(time=at, node=s.node, gpu=s.gpu, metric=s.metric, value=s.value,
                        workload_id=workload_from_pod(s.labels.get("pod")))
        for s in parse_exporter(vendor, text, node=node)
    ]
    return telemetry_record(samples=samples)


def telemetry_ingest_dcgm(*, node: str, text: str, at: datetime | None = None) -> list[TelemetrySample]:
    return telemetry_ingest_exporter(node=node, text=text, vendor="nvidia", at=at)


def telemetry_scrape(*, node: str, url: str, vendor: str = "nvidia") -> list[TelemetrySample]:
    """Fetch one exporter endpoint of the node's vendor and store its samples. Network errors are
    logged, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=setting("TELEMETRY_SCRAPE_TIMEOUT")) as response:  # noqa: S310
            text = response.read(16 * 1024 * 1024).decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        logger.warning("telemetry: scrape of %s (%s) failed: %s", node, url, exc)
        return []
    try:
        return telemetry_ingest_exporter(node=node, text=text, vendor=vendor)
    except ValueError as exc:
        logger.warning("telemetry: %s answered text that is not Prometheus format: %s", url, exc)
        return []


_cpu_measured = False  # whether this process has called psutil.cpu_percent before


def local_samples(*, node: str | None = None, psutil=None, nvml=None, at: datetime | None = None) -> list[TelemetrySample]:
    """This machine's CPU / memory (psutil) and GPUs (NVML, when present), unsaved."""
    node = node or socket.gethostname()
    at = at or timezone.now()
    out = []
    if psutil is None:
        import psutil
    memory = psutil.virtual_memory()
    # psutil measures CPU use since its previous call; the first call of a process has none and
    # answers 0.0, so that one measures over a short interval instead.
    global _cpu_measured
    cpu = psutil.cpu_percent(interval=None if _cpu_measured else 0.2)
    _cpu_measured = True
    for metric, value in (("node.cpu_percent", cpu),
                          ("node.memory_percent", memory.percent),
                          ("node.memory_used_mb", memory.used / 2**20)):
        out.append(TelemetrySample(time=at, node=node, metric=metric, value=float(value)))
    if nvml is None:
        nvml = _nvml()
    if nvml is not None:
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            readers = {
                "gpu.util_percent": lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu,
                "gpu.memory_used_mb": lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used / 2**20,
                "gpu.temperature_c": lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
                "gpu.power_w": lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            }
            for metric, read in readers.items():
                try:
                    out.append(TelemetrySample(time=at, node=node, gpu=index, metric=metric, value=float(read(handle))))
                except Exception:  # noqa: BLE001 - field not supported on this GPU
                    continue
    return out


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml if pynvml.nvmlDeviceGetCount() > 0 else None
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return None


def telemetry_sample_local(*, node: str | None = None) -> list[TelemetrySample]:
    return telemetry_record(samples=local_samples(node=node))


def _roll(queryset, trunc, resolution: int) -> int:
    rows = (queryset.annotate(bucket=trunc).values("bucket", "node", "gpu", "workload_id", "metric")
            .annotate(n=Count("id"), total=Sum("value"), low=Min("value"), high=Max("value")))
    rollups = [TelemetryRollup(resolution=resolution, bucket_start=r["bucket"], node=r["node"], gpu=r["gpu"],
                               workload_id=r["workload_id"], metric=r["metric"], count=r["n"], sum=r["total"],
                               min=r["low"], max=r["high"]) for r in rows]
    TelemetryRollup.objects.bulk_create(rollups, batch_size=2000)
    return len(rollups)


def telemetry_compact(*, now: datetime | None = None) -> dict[str, int]:
    """Retention: raw samples older than the raw window become 1-minute rollups, 1-minute rollups
    older than their window become 1-hour rollups (sums and counts add, extremes are kept), and
    hourly rollups past theirs are deleted. Cut-offs fall on bucket boundaries, so each bucket
    is rolled exactly once; each step is one transaction."""
    now = now or timezone.now()
    raw_cut = (now - timedelta(hours=setting("TELEMETRY_RAW_RETENTION_HOURS"))).replace(second=0, microsecond=0)
    minute_cut = (now - timedelta(days=setting("TELEMETRY_MINUTE_RETENTION_DAYS"))).replace(
        minute=0, second=0, microsecond=0)
    hour_cut = now - timedelta(days=setting("TELEMETRY_HOUR_RETENTION_DAYS"))
    done = {}
    with transaction.atomic():
        old = TelemetrySample.objects.filter(time__lt=raw_cut)
        done["minute_rollups"] = _roll(old, TruncMinute("time"), 60)
        done["raw_deleted"] = old.delete()[0]
    with transaction.atomic():
        old = TelemetryRollup.objects.filter(resolution=60, bucket_start__lt=minute_cut)
        rows = list(old.annotate(bucket=TruncHour("bucket_start")).values("bucket", "node", "gpu", "workload_id", "metric")
                    .annotate(n=Sum("count"), total=Sum("sum"), low=Min("min"), high=Max("max")))
        TelemetryRollup.objects.bulk_create(
            [TelemetryRollup(resolution=3600, bucket_start=r["bucket"], node=r["node"], gpu=r["gpu"],
                             workload_id=r["workload_id"], metric=r["metric"], count=r["n"], sum=r["total"],
                             min=r["low"], max=r["high"]) for r in rows], batch_size=2000)
        done["hour_rollups"] = len(rows)
        done["minute_deleted"] = old.delete()[0]
    done["hour_deleted"] = TelemetryRollup.objects.filter(resolution=3600, bucket_start__lt=hour_cut).delete()[0]
    return done
