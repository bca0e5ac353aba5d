"""The platform's periodic tasks, run by `manage.py run_periodic` (server mode) and by a thread of
`manage.py run_embedded`: Cairn's equivalent of Celery beat, a loop over a fixed table.

Each task runs when its period has passed since it last ran in this process (and once at start).
They are all idempotent and safe to run from several processes at once (bounded deletes and
compactions of what is older than a cut-off), so a second runner, or a restart that runs them
early, does no harm. Sampling node and GPU telemetry is not here: that is `run_telemetry`, every
TELEMETRY_INTERVAL seconds.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from apps.core.loops import run_loop
from apps.projects.services import idempotency_keys_prune
from apps.telemetry.services import telemetry_compact
from apps.tracking.services import tracking_prune_batch_ids

logger = logging.getLogger(__name__)

HOUR = 3600.0


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    run: Callable[[], object]
    every: float  # seconds
    what: str


PERIODIC_TASKS: tuple[PeriodicTask, ...] = (
    PeriodicTask("telemetry_compact", telemetry_compact, HOUR,
                 "telemetry retention: raw samples to 1-minute, then 1-hour rollups; old rollups deleted"),
    PeriodicTask("tracking_prune_batch_ids", tracking_prune_batch_ids, HOUR,
                 "forget ingestion batch ids past TRACKING_BATCH_ID_RETENTION_HOURS"),
    PeriodicTask("idempotency_keys_prune", idempotency_keys_prune, HOUR,
                 "forget create requests' Idempotency-Keys after 24 hours"),
)


class PeriodicPass:
    """One call = run every task whose period has passed. Keeps when each last ran."""

    def __init__(self, tasks: tuple[PeriodicTask, ...] = PERIODIC_TASKS):
        self.tasks = tasks
        self.last_run: dict[str, float] = {}

    def __call__(self) -> list[str]:
        ran = []
        for task in self.tasks:
            if time.monotonic() - self.last_run.get(task.name, float("-inf")) < task.every:
                continue
            try:
                result = task.run()
                logger.info("periodic: %s done (%s)", task.name, result)
                ran.append(task.name)
            except Exception:
                logger.exception("periodic: %s failed; retrying at the next tick", task.name)
                continue
            self.last_run[task.name] = time.monotonic()
        return ran


def run_periodic_loop(*, stop: threading.Event, tick: float = 60.0) -> None:
    """Check the table every `tick` seconds until `stop`."""
    run_loop(name="periodic", work=PeriodicPass(), interval=tick, stop=stop)
