"""The loop every long-running Cairn process shares: do bounded work, sleep, stop cleanly."""
import logging
import signal
import threading
from collections.abc import Callable

from django.db import close_old_connections

from .heartbeat import heartbeat

logger = logging.getLogger(__name__)


def run_loop(*, name: str, work: Callable[[], object], interval: float, stop: threading.Event,
             wait: Callable[[float], None] | None = None) -> None:
    """Call `work` every `interval` seconds until `stop` is set. Errors are logged, never fatal."""
    logger.info("%s: started (every %.1fs)", name, interval)
    while not stop.is_set():
        close_old_connections()
        try:
            work()
        except Exception:
            logger.exception("%s: pass failed; retrying in %.1fs", name, interval)
        heartbeat(name)
        if wait is not None:
            wait(interval)
        else:
            stop.wait(interval)
    close_old_connections()
    logger.info("%s: stopped", name)


def stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM / SIGINT set `stop` so the current pass finishes before the process exits."""

    def handler(signum, frame):
        logger.info("received %s, finishing the current pass", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
