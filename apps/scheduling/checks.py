"""System checks for the scheduler's settings: a value out of range stops `run_scheduler` (and
every other management command) at startup, naming the variable to fix, instead of being clamped
or misread in the middle of a scheduling cycle."""
import math

from django.conf import settings
from django.core import checks

# setting key -> (environment variable, what is accepted, test of a finite number); an error's id
# follows the order (cairn.E101 first): add new settings at the end.
LIMITS = {
    "GPU_NODE_RESERVE": ("CAIRN_GPU_NODE_RESERVE", "a share from 0 to 1", lambda v: 0 <= v <= 1),
    "REPREEMPT_MIN_RUNTIME_SECONDS": ("CAIRN_REPREEMPT_MIN_RUNTIME_SECONDS", "seconds, 0 or more", lambda v: v >= 0),
    "STARVATION_SECONDS": ("CAIRN_STARVATION_SECONDS", "seconds, 0 (off) or more", lambda v: v >= 0),
    "STOP_GRACE_SECONDS": ("CAIRN_STOP_GRACE_SECONDS", "seconds, 0 or more", lambda v: v >= 0),
    "SCHEDULER_INTERVAL": ("CAIRN_SCHEDULER_INTERVAL", "seconds, more than 0", lambda v: v > 0),
    "SERVICE_HALF_LIFE_SECONDS": ("CAIRN_SERVICE_HALF_LIFE_SECONDS", "seconds, more than 0", lambda v: v > 0),
    "TIMESLICE_SECONDS": ("CAIRN_TIMESLICE_SECONDS", "seconds, 0 (off) or more", lambda v: v >= 0),
    "WAIT_REFRESH_SECONDS": ("CAIRN_WAIT_REFRESH_SECONDS", "seconds, 0 (every change) or more", lambda v: v >= 0),
}


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


@checks.register()
def scheduler_settings(app_configs=None, **kwargs) -> list[checks.Error]:
    knobs = getattr(settings, "CAIRN", {})
    errors = []
    for n, (key, (variable, accepted, ok)) in enumerate(LIMITS.items()):
        if key not in knobs:
            continue
        number = _number(knobs[key])
        if not (math.isfinite(number) and ok(number)):
            errors.append(checks.Error(
                f"{variable}={knobs[key]!r}: expected {accepted}.",
                hint=f"Set {variable} in the environment or .env (docs/operations.md lists the settings).",
                id=f"cairn.E{101 + n:03d}",
            ))
    return errors
