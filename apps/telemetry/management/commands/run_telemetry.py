"""`manage.py run_telemetry`: sample this machine (psutil, NVML) for the local cluster and scrape
the DCGM exporters of Kubernetes nodes (TELEMETRY_DCGM_URL_TEMPLATE), every TELEMETRY_INTERVAL
seconds. Retention is `manage.py run_periodic`'s. `manage.py run_embedded` runs the same pass in a
thread (apps/telemetry/loops.py)."""
import threading

from django.core.management.base import BaseCommand

from apps.core.loops import stop_on_signals

from ...loops import TelemetryPass, run_telemetry_loop


class Command(BaseCommand):
    help = "Collect node and GPU telemetry (local sampler, DCGM exporter scrapes)."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None)
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args, **options):
        if options["once"]:
            TelemetryPass()()
            return
        stop = threading.Event()
        stop_on_signals(stop)
        run_telemetry_loop(stop=stop, interval=options["interval"])
