"""`manage.py run_reconciler`: observe replicas and write their status back, forever.

Local clusters: the process table (apps.backends.services.reconcile_once). Kubernetes clusters
with registered credentials: list + watch of their objects (apps.backends.kubernetes.reconciler),
in a thread of this process. `--backend` picks one of them.
"""
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.backends.kubernetes.reconciler import KubernetesReconciler, run_kubernetes_reconciler
from apps.backends.local import netns, sandbox
from apps.backends.loops import reconciler_wakeup, run_reconciler_loop
from apps.backends.services import reconcile_once
from apps.clusters.services import local_cluster_register


class Command(BaseCommand):
    help = (
        "Reconcile workloads with what runs: local processes (exits, restarts, stops, adoption after a "
        "crash) and Kubernetes clusters (list + watch, periodic resync, node inventory). SIGTERM or "
        "Ctrl-C stops it cleanly; replicas keep running."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval", type=float, default=settings.CAIRN["RECONCILER_INTERVAL"],
            help="Seconds between passes (default: CAIRN_RECONCILER_INTERVAL).",
        )
        parser.add_argument("--once", action="store_true", help="Run a single pass and exit.")
        parser.add_argument("--backend", choices=["all", "local", "kubernetes"], default="all",
                            help="Which clusters to reconcile (default: all).")

    def handle(self, *args, interval: float, once: bool, backend: str = "all", **options):
        if once:
            if backend in ("all", "local"):

                local_cluster_register(isolation=sandbox.isolation().level, network=netns.label())
                acted = reconcile_once()
                self.stdout.write(f"reconciled: acted on {acted} workload(s)")
            if backend in ("all", "kubernetes"):
                self.stdout.write(f"kubernetes: acted on {self._kubernetes_once()} workload(s)")
            return
        stop = threading.Event()

        def request_stop(signum, frame):
            self.stderr.write(f"run_reconciler: {signal.Signals(signum).name} received, stopping")
            stop.set()
            reconciler_wakeup.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        kubernetes_thread = None
        if backend in ("all", "kubernetes"):
            # Picks up clusters registered later on its own; idle while there are none.
            kubernetes_thread = threading.Thread(target=run_kubernetes_reconciler, args=(stop, interval),
                                                 name="kubernetes-reconciler", daemon=True)
            kubernetes_thread.start()
        if backend in ("all", "local"):
            run_reconciler_loop(stop, interval)
        else:
            stop.wait()
        if kubernetes_thread is not None:
            kubernetes_thread.join(timeout=10)

    @staticmethod
    def _kubernetes_once() -> int:
        """List everything once (no watch) and run one pass over every Kubernetes cluster."""
        import time
        reconciler = KubernetesReconciler()
        try:
            reconciler.refresh()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(r.synced for r in reconciler.clusters.values()):
                time.sleep(0.05)
            return sum(r.reconcile_pass() for r in reconciler.clusters.values())
        finally:
            reconciler.stop()
