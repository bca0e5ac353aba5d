import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.core.loops import run_loop, stop_on_signals
from apps.sweeps.driver import sweeps_drive


class Command(BaseCommand):
    help = ("Run the sweep driver: ask Optuna for trials, submit them as training workloads, report "
            "objectives, prune, tell results. Several may run; each sweep is driven by one at a time (a lease).")

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.CAIRN["SWEEP_INTERVAL"])
        parser.add_argument("--once", action="store_true", help="Run a single pass and exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        if once:
            self.stdout.write(f"drove {sweeps_drive()} sweep(s)")
            return
        stop = threading.Event()
        stop_on_signals(stop)
        run_loop(name="sweeps", work=sweeps_drive, interval=interval, stop=stop)
