import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.core.loops import run_loop, stop_on_signals
from apps.scheduling.services import scheduling_cycle


class Command(BaseCommand):
    help = "Run the scheduler loop (one active leader across processes, by PostgreSQL advisory lock)."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.CAIRN["SCHEDULER_INTERVAL"])
        parser.add_argument("--once", action="store_true", help="Run a single cycle and exit.")

    def handle(self, *args, interval: float, once: bool, **options):
        if once:
            result = scheduling_cycle()
            self.stdout.write(f"admitted {result.admitted}, waiting {result.waiting}, leader={result.ran}")
            return
        stop = threading.Event()
        stop_on_signals(stop)
        run_loop(name="scheduler", work=scheduling_cycle, interval=interval, stop=stop)
