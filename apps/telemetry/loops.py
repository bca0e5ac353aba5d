"""The telemetry pass shared by `manage.py run_telemetry` (server mode) and `manage.py
run_embedded` (a thread of its own): sample this machine for the local cluster's node and scrape
the DCGM exporters of Kubernetes nodes. Retention (rollups) is a periodic task of `run_periodic`
(apps/portal/periodic.py)."""
from __future__ import annotations

import threading

from django.conf import settings

from apps.clusters.backends import backend_specs
from apps.clusters.models import Node
from apps.core.loops import run_loop

from .conf import setting
from .services import telemetry_sample_local, telemetry_scrape


def _backends_with(node_telemetry: str) -> list[str]:
    """The backends whose nodes are measured this way (BackendSpec.node_telemetry)."""
    return [spec.name for spec in backend_specs() if spec.node_telemetry == node_telemetry]


class TelemetryPass:
    """One call = one pass."""

    def __call__(self) -> None:
        nodes = Node.objects.select_related("cluster")
        sampled, scraped = _backends_with("this_machine"), _backends_with("exporter")
        local = nodes.filter(cluster__backend__in=sampled, cluster__name=settings.CAIRN["LOCAL_CLUSTER_NAME"]).first()
        telemetry_sample_local(node=local.name if local else None)
        templates = {"nvidia": setting("TELEMETRY_DCGM_URL_TEMPLATE"),
                     **(setting("TELEMETRY_EXPORTER_URL_TEMPLATES") or {})}
        if any(templates.values()):
            for node in nodes.filter(cluster__backend__in=scraped):
                # A node without accelerators keeps the DCGM scrape it always had.
                vendor = node.accelerator_type if node.accelerator_type in templates else "nvidia"
                if templates.get(vendor):
                    telemetry_scrape(node=node.name, url=templates[vendor].format(node=node.name), vendor=vendor)


def run_telemetry_loop(*, stop: threading.Event, interval: float | None = None) -> None:
    """Collect telemetry every `interval` seconds (TELEMETRY_INTERVAL by default) until `stop`."""
    run_loop(name="telemetry", work=TelemetryPass(), interval=interval or float(setting("TELEMETRY_INTERVAL")),
             stop=stop)
