"""Cairn's own Prometheus metrics, served at /metrics (staff, METRICS_TOKEN or an allowed network)."""
from __future__ import annotations

import hmac
import ipaddress

from django.db.models import Count, F, Sum
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from apps.clusters.models import Node
from apps.deployments.metrics import PROMETHEUS as SERVE_METRICS
from apps.notebooks.selectors import reclaimed_gpu_hours
from apps.projects.models import Project
from apps.tracking.models import Run
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.runtime import Runtime

from .conf import setting


class CairnCollector:
    """Gauges read from PostgreSQL at scrape time: the same numbers in every web process."""

    def collect(self):
        workloads = GaugeMetricFamily("cairn_workloads", "Workloads by kind and status", labels=["kind", "status"])
        for row in Workload.objects.values("kind", "status").annotate(n=Count("id")).order_by():
            workloads.add_metric([row["kind"], row["status"]], row["n"])
        yield workloads
        yield from self._queued(Workload)
        runs = GaugeMetricFamily("cairn_runs", "Tracked runs by status", labels=["status"])
        for row in Run.objects.values("status").annotate(n=Count("id")).order_by():
            runs.add_metric([row["status"]], row["n"])
        yield runs
        nodes = GaugeMetricFamily("cairn_nodes", "Nodes by health and schedulability", labels=["health", "schedulable"])
        for row in Node.objects.values("health", "schedulable").annotate(n=Count("id")).order_by():
            nodes.add_metric([row["health"], str(row["schedulable"]).lower()], row["n"])
        yield nodes
        yield from self._reclaimed()
        yield from self._resilience()

    @staticmethod
    def _resilience():
        """Self-healing (docs/training.md): stragglers flagged in running jobs, restarts by reason."""
        stragglers = GaugeMetricFamily("cairn_training_stragglers", "Ranks of running training jobs flagged as "
                                       "stragglers in their current attempt", labels=["project", "workload"])
        running = Workload.objects.filter(status=WorkloadStatus.RUNNING, runtime__has_key="stragglers")
        for workload_id, slug, runtime in running.values_list("id", "project__slug", "runtime"):
            flagged = Runtime.from_json(runtime).stragglers
            if flagged:
                stragglers.add_metric([slug, str(workload_id)], len(flagged))
        yield stragglers
        healed = GaugeMetricFamily("cairn_training_self_healing_events", "Self-healing events so far, by reason",
                                   labels=["reason"])
        reasons = ("Hung", "Straggler", "SlowNode", "NodeUnhealthy", "CheckpointSaved")
        for row in (WorkloadEvent.objects.filter(reason__in=reasons).values("reason").annotate(n=Count("id"))
                    .order_by()):
            healed.add_metric([row["reason"]], row["n"])
        yield healed


    @staticmethod
    def _reclaimed():
        """What the notebooks' idle culler gave back, per project (docs/notebooks.md)."""
        found = reclaimed_gpu_hours()
        slugs = dict(Project.objects.filter(pk__in=list(found)).values_list("pk", "slug"))
        reclaims = GaugeMetricFamily("cairn_notebook_reclaims", "Notebooks stopped by the idle culler",
                                     labels=["project"])
        hours = GaugeMetricFamily("cairn_notebook_reclaimed_gpu_hours",
                                  "GPU-hours freed by the idle culler (each reclaim until the notebook started again)",
                                  labels=["project"])
        for project_id, entry in sorted(found.items()):
            slug = slugs.get(project_id, str(project_id))
            reclaims.add_metric([slug], entry["reclaims"])
            hours.add_metric([slug], entry["gpu_hours"])
        yield reclaims
        yield hours

    @staticmethod
    def _queued(workload_model):
        """Queued work by pool, project and what it waits on (the scheduler's waiting_on; "" until
        its first decision): demand waiting on quota wants a bigger nominal, on capacity more nodes."""
        labels = ["pool", "project", "waiting_on"]
        count = GaugeMetricFamily("cairn_queued_workloads", "Queued workloads by what they wait on", labels=labels)
        gpus = GaugeMetricFamily("cairn_queued_gpus", "GPUs asked for by queued workloads, by what they wait on",
                                 labels=labels)
        rows = (workload_model.objects.filter(status=WorkloadStatus.QUEUED)
                .values("pool__name", "project__slug", "waiting_on")
                .annotate(n=Count("id"), gpu_milli=Sum(F("gpu_milli") * F("replicas"))).order_by())
        for row in rows:
            key = [row["pool__name"], row["project__slug"], row["waiting_on"]]
            count.add_metric(key, row["n"])
            gpus.add_metric(key, (row["gpu_milli"] or 0) / 1000)
        yield count
        yield gpus


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(CairnCollector())
for _collector in SERVE_METRICS:  # the gateway's request metrics, counted in this process
    REGISTRY.register(_collector)


def _client_allowed(request) -> bool:
    networks = setting("METRICS_ALLOWED_NETWORKS")
    if not networks:
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(n, strict=False) for n in networks)


def _token_allowed(request) -> bool:
    expected = setting("METRICS_TOKEN")
    header = request.META.get("HTTP_AUTHORIZATION", "")
    return bool(expected) and hmac.compare_digest(header.encode(), f"Bearer {expected}".encode())


class MetricsAccess(BasePermission):
    def has_permission(self, request, view):
        if _client_allowed(request) or _token_allowed(request):
            return True
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated()
        if not request.user.is_staff:
            raise exceptions.PermissionDenied("Only Cairn administrators can read /metrics.")
        return True


class MetricsView(APIView):
    """Prometheus text exposition of Cairn's own metrics."""

    permission_classes = [MetricsAccess]
    schema = None

    def get_authenticators(self):
        if _token_allowed(self.request):  # Django's request, set by View.setup() before DRF wraps it
            return []
        return super().get_authenticators()

    def get(self, request):
        return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
