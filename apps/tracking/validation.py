"""Checking an ingestion batch. Pure: raises ServiceError with a message naming the bad item."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apps.core.errors import ServiceError

from .choices import KEY_MAX_LENGTH, KEY_PATTERN, MAX_STEP
from .conf import setting

BATCH_ID_PATTERN = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
# Wall times outside this window are surely a unit mistake (ms instead of s, ...).
TIME_MIN = datetime(2000, 1, 1, tzinfo=UTC).timestamp()
TIME_MAX = datetime(2200, 1, 1, tzinfo=UTC).timestamp()


@dataclass
class Batch:
    batch_id: str | None
    points: list[tuple[str, int, float, float]] = field(default_factory=list)  # key, step, value, epoch seconds
    params: dict[str, object] = field(default_factory=dict)
    progress: Progress | None = None


@dataclass(frozen=True)
class Progress:
    """The sending rank's last step and its recent step times (seconds), for hang and straggler
    detection (apps.training)."""

    replica: int
    step: int
    steps: list[tuple[int, float]]
    done: bool = False  # the rank called cairn.finish()


MAX_PROGRESS_STEPS = 1000


def parse_progress(data) -> Progress:
    if not isinstance(data, dict) or not set(data) <= {"replica", "step", "steps", "done"}:
        raise ServiceError('progress must be an object with replica, step and steps ([[step, seconds], ...]).')
    replica, step, steps = data.get("replica"), data.get("step"), data.get("steps", [])
    for name, value, top in (("replica", replica, 100_000), ("step", step, MAX_STEP)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
            raise ServiceError(f"progress.{name} must be an integer from 0 to {top}.")
    if not isinstance(steps, list) or len(steps) > MAX_PROGRESS_STEPS:
        raise ServiceError(f"progress.steps must be a list of at most {MAX_PROGRESS_STEPS} [step, seconds] pairs.")
    out = []
    for index, item in enumerate(steps):
        if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], int) or isinstance(item[0], bool)
                or not 0 <= item[0] <= MAX_STEP or not _is_number(item[1]) or not math.isfinite(item[1])
                or not 0 <= item[1] <= 10**7):
            raise ServiceError(f"progress.steps[{index}] must be [step, seconds] with seconds from 0 to 1e7.")
        out.append((item[0], float(item[1])))
    done = data.get("done", False)
    if not isinstance(done, bool):
        raise ServiceError("progress.done must be true or false.")
    return Progress(replica=replica, step=step, steps=out, done=done)


def check_key(key, where: str) -> str:
    if not isinstance(key, str):
        raise ServiceError(f"{where}: key must be a string.")
    if not KEY_PATTERN.match(key):
        raise ServiceError(
            f"{where}: key {key[:50]!r} is invalid: 1-{KEY_MAX_LENGTH} characters of letters, digits and _ . - / :,"
            " starting with a letter, digit or _."
        )
    return key


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TIMES = (float, int)
_POINT_FIELDS = frozenset({"key", "step", "value", "time"})


def _check_point(point, where: str, keys: set[str], max_keys: int, now: float) -> tuple[str, int, float, float]:
    if not isinstance(point, dict):
        raise ServiceError(f"{where}: each point must be an object with key, step, value and optional time.")
    if len(point) > 4 or not point.keys() <= _POINT_FIELDS:
        extra = sorted(set(point) - _POINT_FIELDS)
        raise ServiceError(f"{where}: unknown field(s): {', '.join(map(str, extra))}.")
    key = point.get("key")
    if key not in keys:
        check_key(key, where)
        keys.add(key)
        if len(keys) > max_keys:
            raise ServiceError(f"Too many distinct keys in one batch (at most {max_keys}).")
    step = point.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        raise ServiceError(f"{where}: step must be an integer.")
    if step < 0 or step > MAX_STEP:
        raise ServiceError(f"{where}: step must be between 0 and {MAX_STEP}.")
    value = point.get("value")
    if not _is_number(value):
        raise ServiceError(f"{where}: value must be a number, not {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ServiceError(f"{where}: value must be finite (no NaN or Infinity).")
    when = point.get("time", now)
    if not _is_number(when) or not (TIME_MIN <= when <= TIME_MAX):
        raise ServiceError(f"{where}: time must be a Unix timestamp in seconds.")
    return key, int(step), value, float(when)


def parse_batch(data, *, now: float) -> Batch:
    if not isinstance(data, dict):
        raise ServiceError("The body must be a JSON object with 'points' and/or 'params'.")
    unknown = sorted(set(data) - {"batch_id", "points", "params", "progress"})
    if unknown:
        raise ServiceError(f"Unknown field(s): {', '.join(unknown)}.")
    batch_id = data.get("batch_id")
    if batch_id is not None and (not isinstance(batch_id, str) or not BATCH_ID_PATTERN.match(batch_id)):
        raise ServiceError("batch_id must be 1-64 characters of letters, digits, _ and -.")
    batch = Batch(batch_id=batch_id)

    points = data.get("points", [])
    if not isinstance(points, list):
        raise ServiceError("points must be a list.")
    max_points = setting("TRACKING_MAX_POINTS_PER_BATCH")
    if len(points) > max_points:
        raise ServiceError(f"Too many points in one batch: {len(points)} (at most {max_points}).")
    max_keys = setting("TRACKING_MAX_KEYS_PER_BATCH")
    keys: set[str] = set()
    out = batch.points
    append = out.append
    for index, point in enumerate(points):
        # The common case in a few cheap checks; anything unusual takes _check_point, which
        # raises the first error in the documented order (or accepts, e.g. int subclasses).
        if type(point) is dict:
            key, step, value = point.get("key"), point.get("step"), point.get("value")
            when = point.get("time", now)
            kind = type(value)
            if (key in keys and type(step) is int and 0 <= step <= MAX_STEP and (kind is float or kind is int)
                    and len(point) == (4 if "time" in point else 3) and type(when) in _TIMES
                    and TIME_MIN <= when <= TIME_MAX):
                value = float(value)
                if value - value == 0.0:  # finite
                    append((key, step, value, float(when)))
                    continue
        append(_check_point(point, f"points[{index}]", keys, max_keys, now))

    params = data.get("params", {})
    if not isinstance(params, dict):
        raise ServiceError("params must be an object.")
    max_params = setting("TRACKING_MAX_PARAMS_PER_BATCH")
    if len(params) > max_params:
        raise ServiceError(f"Too many params in one batch: {len(params)} (at most {max_params}).")
    max_length = setting("TRACKING_PARAM_VALUE_MAX_LENGTH")
    for key, value in params.items():
        where = f"params[{key[:50]!r}]"
        check_key(key, where)
        if isinstance(value, str):
            if len(value) > max_length:
                raise ServiceError(f"{where}: value is longer than {max_length} characters.")
            if "\x00" in value:
                raise ServiceError(f"{where}: value must not contain NUL characters.")
        elif _is_number(value):
            if not math.isfinite(value):
                raise ServiceError(f"{where}: value must be finite.")
        elif value is not None and not isinstance(value, bool):
            raise ServiceError(f"{where}: value must be a string, number, boolean or null.")
        batch.params[key] = value
    if data.get("progress") is not None:
        batch.progress = parse_progress(data["progress"])
    return batch
