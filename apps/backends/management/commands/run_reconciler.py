"""`manage.py run_reconciler`: observe local replicas and write their status back, forever."""
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.backends.loops import reconciler_wakeup, run_reconciler_loop


class Command(BaseCommand):
    help = (
        "Reconcile workloads of local clusters with their processes: exits, restarts, stops, "
        "adoption after a crash. SIGTERM or Ctrl-C stops it cleanly; replicas keep running."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval", type=float, default=settings.CAIRN["RECONCILER_INTERVAL"],
            help="Seconds between passes (default: CAIRN_RECONCILER_INTERVAL).",
        )
        parser.add_argument("--once", action="store_true", help="Run a single pass and exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        if once:
            from apps.backends.services import reconcile_once
            from apps.clusters.services import local_cluster_register

            local_cluster_register()
            acted = reconcile_once()
            self.stdout.write(f"reconciled: acted on {acted} workload(s)")
            return
        stop = threading.Event()

        def request_stop(signum, frame):
            self.stderr.write(f"run_reconciler: {signal.Signals(signum).name} received, stopping")
            stop.set()
            reconciler_wakeup.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        run_reconciler_loop(stop, interval)
