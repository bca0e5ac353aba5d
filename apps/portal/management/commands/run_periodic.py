"""`manage.py run_periodic`: the platform's periodic tasks (apps/portal/periodic.py): telemetry
retention, pruning of ingestion batch ids and of idempotency keys. Server mode runs one (a second
does no harm); `manage.py run_embedded` runs the same loop in a thread."""
import threading

from django.core.management.base import BaseCommand

from apps.core.loops import stop_on_signals

from ...periodic import PERIODIC_TASKS, PeriodicPass, run_periodic_loop


class Command(BaseCommand):
    help = "Run Cairn's periodic tasks (retention and pruning) on their schedule."

    def add_arguments(self, parser):
        parser.add_argument("--tick", type=float, default=60.0, help="Seconds between checks of the schedule.")
        parser.add_argument("--once", action="store_true", help="Run every task once, then exit.")
        parser.add_argument("--list", action="store_true", help="List the tasks and their periods, then exit.")

    def handle(self, *args, tick: float, once: bool, list: bool, **options):
        if list:
            for task in PERIODIC_TASKS:
                self.stdout.write(f"{task.name}  every {task.every:g}s  {task.what}")
            return
        if once:
            self.stdout.write("ran: " + ", ".join(PeriodicPass()()))
            return
        stop = threading.Event()
        stop_on_signals(stop)
        run_periodic_loop(stop=stop, tick=tick)
