"""The reconciler loop, shared by `manage.py run_reconciler` and the embedded server's thread."""
import logging
import threading
import time

from django.db import close_old_connections, connection

from apps.clusters.services import local_cluster_register
from apps.core.heartbeat import heartbeat

from .local import netns, sandbox, startup
from .local.reconciler import reconcile_once
from .wakeup import reconciler_wakeup

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 30.0  # how often the local node's capacity and last_seen_at are refreshed


def _sleep(stop: threading.Event, seconds: float) -> None:
    """Wait until the next tick, an early wake-up, or stop (checked at least every 0.25s)."""
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0 or reconciler_wakeup.wait(min(remaining, 0.25)):
            break
    reconciler_wakeup.clear()


def run_reconciler_loop(stop: threading.Event, interval: float) -> None:
    """Reconcile local workloads every `interval` seconds until `stop` is set.

    Registers this machine as the local cluster's node first and refreshes it now and then.
    A failing pass (database down, ...) is logged and retried on the next tick.
    """
    logger.info("reconciler: started (interval %gs)", interval)
    startup.log_start_up_warning()  # server mode's log says how replicas here are isolated
    last_heartbeat = float("-inf")
    try:
        while not stop.is_set():
            close_old_connections()
            try:
                if time.monotonic() - last_heartbeat >= HEARTBEAT_SECONDS:
                    node = local_cluster_register(isolation=sandbox.isolation().level, network=netns.label())
                    last_heartbeat = time.monotonic()
                    logger.debug("reconciler: node %s registered", node)
                acted = reconcile_once()
                if acted:
                    logger.info("reconciler: acted on %s workload(s)", acted)
            except Exception:
                logger.exception("reconciler: pass failed; retrying in %gs", interval)
            heartbeat("reconciler")
            _sleep(stop, interval)
    finally:
        connection.close()
        logger.info("reconciler: stopped")


def reconcile_local_once() -> int:
    """`run_reconciler --once` for local clusters: register this machine's node, one pass."""
    local_cluster_register(isolation=sandbox.isolation().level, network=netns.label())
    return reconcile_once()
