"""`make run`: Cairn on one machine with no external services.

One process: the ASGI web server (HTTP + websockets), and in threads the scheduler, the
outbox relay (which runs tasks in-process), the local reconciler and the telemetry sampler. Ctrl-C stops the web
server, then the loops, then every replica process Cairn started.
"""
import logging
import os
import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from apps.core.loops import run_loop
from apps.core.outbox import outbox_relay, outbox_wakeup

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Start Cairn in embedded mode (web + scheduler + reconciler + in-process tasks)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-demo", action="store_true", help="Do not create the demo project and job.")

    def handle(self, *args, host: str, port: int, no_demo: bool, **options):
        import uvicorn

        from apps.backends.loops import run_reconciler_loop
        from apps.backends.services import local_backend_shutdown
        from apps.scheduling.services import scheduling_cycle
        from apps.telemetry.loops import run_telemetry_loop

        settings.CAIRN_DATA_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        if not no_demo:
            call_command("seed_demo", stdout=self.stdout)

        stop = threading.Event()
        loops = [
            threading.Thread(target=run_loop, name="scheduler", daemon=True, kwargs={
                "name": "scheduler", "work": scheduling_cycle, "interval": settings.CAIRN["SCHEDULER_INTERVAL"],
                "stop": stop}),
            threading.Thread(target=run_loop, name="outbox", daemon=True, kwargs={
                "name": "outbox", "work": outbox_relay, "interval": settings.CAIRN["OUTBOX_INTERVAL"], "stop": stop,
                "wait": outbox_wakeup.wait}),
            threading.Thread(target=run_reconciler_loop, name="reconciler", daemon=True, kwargs={
                "stop": stop, "interval": settings.CAIRN["RECONCILER_INTERVAL"]}),
            # This machine's CPU, memory and GPUs for the cluster page and node telemetry.
            threading.Thread(target=run_telemetry_loop, name="telemetry", daemon=True, kwargs={"stop": stop}),
        ]
        for thread in loops:
            thread.start()

        url = f"http://{host}:{port}"
        if "CAIRN_PUBLIC_URL" not in os.environ:
            # Jobs report metrics to the address this server really listens on.
            local_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            settings.CAIRN["PUBLIC_URL"] = f"http://{local_host}:{port}"
        self.stdout.write(self.style.SUCCESS(f"\nCairn is running at {url}  (API docs: {url}/api/docs/)"))
        if not no_demo:
            from .seed_demo import _admin_password

            self.stdout.write(self.style.SUCCESS(f"Log in as admin / {_admin_password()}   (Ctrl-C to stop)\n"))
        server = uvicorn.Server(uvicorn.Config("config.asgi:application", host=host, port=port, lifespan="off",
                                               log_level="warning", ws="auto"))
        try:
            server.run()
        finally:
            self.stdout.write("stopping: loops, then replica processes...")
            stop.set()
            outbox_wakeup.set()
            for thread in loops:
                thread.join(timeout=10)
            local_backend_shutdown()
            self.stdout.write("Cairn stopped.")
