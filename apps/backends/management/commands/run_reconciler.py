"""`manage.py run_reconciler`: observe replicas and write their status back, forever.

Every backend of settings.CAIRN_BACKENDS runs its own reconciler loop (the RECONCILER its package
declares, apps/backends/base.py) in a thread of this process: local clusters from the process
table (apps.backends.local.reconciler), Kubernetes clusters with registered credentials by list +
watch (apps.backends.kubernetes.reconciler), Slurm clusters from squeue and sinfo
(apps.backends.slurm.reconciler). `--backend` picks one of them.
"""
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.backends.base import backend_packages, load
from apps.backends.wakeup import reconciler_wakeup


class Command(BaseCommand):
    help = (
        "Reconcile workloads with what runs on every backend: local processes (exits, restarts, stops, "
        "adoption after a crash), Kubernetes clusters (list + watch, periodic resync, node inventory), Slurm "
        "clusters (jobs and nodes). SIGTERM or Ctrl-C stops it cleanly; replicas keep running."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval", type=float, default=settings.CAIRN["RECONCILER_INTERVAL"],
            help="Seconds between passes (default: CAIRN_RECONCILER_INTERVAL).",
        )
        parser.add_argument("--once", action="store_true", help="Run a single pass and exit.")
        parser.add_argument("--backend", choices=["all", *backend_packages()], default="all",
                            help="Which clusters to reconcile (default: all).")

    def handle(self, *args, interval: float, once: bool, backend: str = "all", **options):
        packages = {name: package for name, package in backend_packages().items() if backend in ("all", name)}
        if once:
            for name, package in packages.items():
                acted = load(package.RECONCILE_ONCE)()
                self.stdout.write(f"{name}: acted on {acted} workload(s)")
            return
        stop = threading.Event()

        def request_stop(signum, frame):
            self.stderr.write(f"run_reconciler: {signal.Signals(signum).name} received, stopping")
            stop.set()
            reconciler_wakeup.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        # Each picks up clusters registered later on its own; idle while there are none.
        threads = [threading.Thread(target=load(package.RECONCILER), args=(stop, interval),
                                    name=f"{name}-reconciler", daemon=True) for name, package in packages.items()]
        for thread in threads:
            thread.start()
        stop.wait()
        for thread in threads:
            thread.join(timeout=10)
