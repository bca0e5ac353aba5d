"""`manage.py run_culler`: the notebooks' idle culler (docs/notebooks.md, "Idle reclaim"). It reads
each running notebook's activity from its IDE, so it must reach notebooks as the web process's
proxy does. `manage.py run_embedded` runs the same pass in a thread (apps/notebooks/loops.py)."""
import threading

from django.core.management.base import BaseCommand

from apps.core.loops import stop_on_signals

from ...loops import run_culler_loop
from ...services import notebook_cull_pass


class Command(BaseCommand):
    help = "Stop notebooks idle past their idle_timeout (no busy kernel, GPUs under the threshold)."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None)
        parser.add_argument("--once", action="store_true", help="One pass, then exit.")

    def handle(self, *args, **options):
        if options["once"]:
            stopped = notebook_cull_pass()
            self.stdout.write(f"culler: stopped {len(stopped)} idle notebook(s).")
            return
        stop = threading.Event()
        stop_on_signals(stop)
        run_culler_loop(stop=stop, interval=options["interval"])
