"""`make run`: Cairn on one machine with no external services.

One process: the ASGI web server (HTTP + websockets), and in threads the scheduler, the
outbox relay (which runs tasks in-process), the local reconciler, the telemetry sampler (this
machine's CPU, memory and GPUs), the periodic tasks (retention, pruning: apps/portal/periodic.py)
and the sweep driver. Ctrl-C stops the web server, then the loops, then every replica process
Cairn started (their workloads end STOPPED, reason ServerShutdown, and are not started again by
the next start).

The port is bound first, before anything starts: a busy port is a clear error naming it and how
to pick another; "Cairn is running" is printed once the server accepts connections.
"""
import errno
import logging
import os
import socket
import threading

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.backends.local import netns, sandbox
from apps.backends.local.reconciler import local_backend_shutdown
from apps.backends.loops import run_reconciler_loop
from apps.core.loops import run_loop
from apps.core.outbox import outbox_relay, outbox_wakeup
from apps.core.proxy import close_pools
from apps.core.proxyheaders import uvicorn_proxy_options
from apps.notebooks.loops import run_culler_loop
from apps.scheduling.services import scheduling_cycle
from apps.sweeps.driver import sweeps_drive
from apps.telemetry.loops import run_telemetry_loop

from ...periodic import run_periodic_loop

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Start Cairn in embedded mode (web + scheduler + reconciler + in-process tasks)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (make run HOST=...).")
        parser.add_argument("--port", type=int, default=8000, help="Port to listen on (make run PORT=...).")
        parser.add_argument("--no-demo", action="store_true", help="Do not create the demo project and job.")

    def handle(self, *args, host: str, port: int, no_demo: bool, **options):

        listener = _bind(host, port)
        settings.CAIRN_DATA_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        if not no_demo:
            call_command("seed_demo", stdout=self.stdout)

        isolation = sandbox.isolation()
        say = self.style.SUCCESS if isolation.isolated else self.style.WARNING
        self.stdout.write(say(f"Local backend: {isolation.describe()}."))
        network = netns.network()
        self.stdout.write((self.style.SUCCESS if network.available else self.style.WARNING)(
            f"Local backend: {network.describe()}."))

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
            threading.Thread(target=run_periodic_loop, name="periodic", daemon=True, kwargs={"stop": stop}),
            # Notebooks idle past their idle_timeout are stopped (docs/notebooks.md).
            threading.Thread(target=run_culler_loop, name="culler", daemon=True, kwargs={"stop": stop}),
        ]
        if settings.CAIRN["SWEEP_DRIVER_EMBEDDED"]:
            # Hyper-parameter sweeps: asks Optuna for trials and follows them (apps/sweeps/driver.py).
            loops.append(threading.Thread(target=run_loop, name="sweeps", daemon=True, kwargs={
                "name": "sweeps", "work": sweeps_drive, "interval": settings.CAIRN["SWEEP_INTERVAL"], "stop": stop}))
        for thread in loops:
            thread.start()

        url = f"http://{host}:{port}"
        if "CAIRN_PUBLIC_URL" not in os.environ:
            # Jobs report metrics to the address this server really listens on.
            local_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            settings.CAIRN["PUBLIC_URL"] = f"http://{local_host}:{port}"

        def ready() -> None:
            self.stdout.write(self.style.SUCCESS(f"\nCairn is running at {url}  (API docs: {url}/api/docs/)"))
            if not no_demo:
                from .seed_demo import _admin_password

                self.stdout.write(self.style.SUCCESS(f"Log in as admin / {_admin_password()}   (Ctrl-C to stop)\n"))
            self.stdout.flush()

        server = _Server(uvicorn.Config("config.asgi:application", host=host, port=port, lifespan="off",
                                        log_level="warning", ws="auto", **uvicorn_proxy_options()), on_ready=ready)
        try:
            server.run(sockets=[listener])
        finally:
            self.stdout.write("stopping: loops, then replica processes...")
            stop.set()
            outbox_wakeup.set()
            for thread in loops:
                thread.join(timeout=10)
            signalled = local_backend_shutdown()
            ended = f" ({signalled} replica process(es) ended; their workloads are stopped)" if signalled else ""
            self.stdout.write(f"Cairn stopped{ended}.")


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound now so that a busy port stops the start with a clear error."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listener = socket.socket(family, kind, proto)
    except (OSError, OverflowError) as exc:
        raise CommandError(f"Cannot listen on {host}:{port}: {exc}.") from None
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(
                f"Port {port} on {host} is already in use by another program. Choose another port: "
                f"`make run PORT={port + 1}` (or `manage.py run_embedded --port {port + 1}`)."
            ) from None
        raise CommandError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    listener.set_inheritable(False)
    return listener


class _Server(uvicorn.Server):
    """uvicorn's server, calling `on_ready` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, *, on_ready):
        super().__init__(config)
        self.on_ready = on_ready

    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        if not self.should_exit:
            self.on_ready()

    async def shutdown(self, sockets=None):
        await super().shutdown(sockets=sockets)
        await close_pools()  # the gateway's and the notebook proxy's connections to their upstreams
