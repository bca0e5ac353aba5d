import re

from django.db import models


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    FAILED = "failed", "Failed"
    STOPPED = "stopped", "Stopped"  # its workload was stopped before it ended on its own


TRANSITIONS: dict[str, frozenset[str]] = {
    RunStatus.RUNNING: frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.STOPPED}),
    RunStatus.FINISHED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.STOPPED: frozenset(),
}


def can_transition(a: str, b: str) -> bool:
    return b in TRANSITIONS.get(a, frozenset())


# Metric and param keys: what dashboards, CSV columns and URLs can carry without escaping trouble.
KEY_MAX_LENGTH = 200
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/:]{0,199}$")
MAX_STEP = 10**15  # far beyond any training loop, and exact in a float64 on the client side

# Rollup levels: level L aggregates steps in blocks of 16**L (level 2 = 256 steps, ... level 5 = ~1M).
# Consecutive levels. Below level 2, reads decode raw chunks (cheap: at most ~43k points per chart).
ROLLUP_BASE = 16
ROLLUP_LEVELS = (2, 3, 4, 5)


def level_width(level: int) -> int:
    return ROLLUP_BASE**level
