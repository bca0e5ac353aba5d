"""The telemetry pass shared by `manage.py run_telemetry` (server mode) and `manage.py
run_embedded` (a thread of its own): sample this machine for the local cluster's node, scrape the
DCGM exporters of Kubernetes nodes, and apply retention hourly."""
from __future__ import annotations

import threading
import time

from django.conf import settings

from apps.clusters.models import Node
from apps.core.loops import run_loop
from apps.tracking.services import tracking_prune_batch_ids

from .conf import setting
from .services import telemetry_compact, telemetry_sample_local, telemetry_scrape


class TelemetryPass:
    """One call = one pass. Keeps when retention last ran, so it runs at most hourly."""

    def __init__(self, *, compact: bool = True):
        self.compact = compact
        self.last_compact = float("-inf")

    def __call__(self) -> None:

        nodes = Node.objects.select_related("cluster")
        local = nodes.filter(cluster__backend="local", cluster__name=settings.CAIRN["LOCAL_CLUSTER_NAME"]).first()
        telemetry_sample_local(node=local.name if local else None)
        template = setting("TELEMETRY_DCGM_URL_TEMPLATE")
        if template:
            for node in nodes.filter(cluster__backend="kubernetes"):
                telemetry_scrape(node=node.name, url=template.format(node=node.name))
        if self.compact and time.monotonic() - self.last_compact > 3600:
            telemetry_compact()
            tracking_prune_batch_ids()
            self.last_compact = time.monotonic()


def run_telemetry_loop(*, stop: threading.Event, interval: float | None = None) -> None:
    """Collect telemetry every `interval` seconds (TELEMETRY_INTERVAL by default) until `stop`."""
    run_loop(name="telemetry", work=TelemetryPass(), interval=interval or float(setting("TELEMETRY_INTERVAL")),
             stop=stop)
