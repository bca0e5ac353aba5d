"""`manage.py run_telemetry`: sample this machine (psutil, NVML) for the local cluster, scrape the
DCGM exporters of Kubernetes nodes (TELEMETRY_DCGM_URL_TEMPLATE), and apply retention hourly
(telemetry rollups, and tracking's batch ids: this is the platform's hourly housekeeping)."""
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.core.loops import run_loop, stop_on_signals
from apps.tracking.services import tracking_prune_batch_ids

from ...conf import setting
from ...services import telemetry_compact, telemetry_sample_local, telemetry_scrape


class Command(BaseCommand):
    help = "Collect node and GPU telemetry (local sampler, DCGM exporter scrapes) and apply retention."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None)
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args, **options):
        interval = options["interval"] or setting("TELEMETRY_INTERVAL")
        last_compact = [0.0]

        def work():
            from apps.clusters.models import Node

            nodes = Node.objects.select_related("cluster")
            local = nodes.filter(cluster__backend="local", cluster__name=settings.CAIRN["LOCAL_CLUSTER_NAME"]).first()
            telemetry_sample_local(node=local.name if local else None)
            template = setting("TELEMETRY_DCGM_URL_TEMPLATE")
            if template:
                for node in nodes.filter(cluster__backend="kubernetes"):
                    telemetry_scrape(node=node.name, url=template.format(node=node.name))
            if time.monotonic() - last_compact[0] > 3600:
                telemetry_compact()
                tracking_prune_batch_ids()
                last_compact[0] = time.monotonic()

        if options["once"]:
            work()
            return
        stop = threading.Event()
        stop_on_signals(stop)
        run_loop(name="telemetry", work=work, interval=interval, stop=stop)
