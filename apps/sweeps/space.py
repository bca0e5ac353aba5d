"""A sweep's search space: checked once at creation, then turned into Optuna `suggest_*` calls.

Accepted (a mapping in order, or a list of entries with `name`):

    lr:       {type: float, low: 1.0e-4, high: 0.1, log: true}
    hidden:   {type: int, low: 16, high: 256, log: true}
    layers:   {type: int, low: 1, high: 3}               # step: 1 by default
    solver:   {type: categorical, choices: [adam, sgd]}
    momentum: {type: float, low: 0.5, high: 0.99, when: {solver: sgd}}   # conditional

`when` makes a parameter conditional: it is sampled only when every named earlier categorical
parameter has one of the given values (a value or a list). Grid search enumerates each
parameter: categorical choices, int ranges (with `step`), floats with a `step`; it takes no
conditional parameters. Stored as a list, in the order given (PostgreSQL's jsonb does not keep
the order of an object's keys, and conditions refer to earlier parameters).
"""
from __future__ import annotations

import itertools
import math
import re

from apps.core.errors import ServiceError

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
MAX_PARAMS = 50
MAX_CHOICES = 1000
MAX_GRID = 100_000
TYPES = ("int", "float", "categorical")
ALLOWED_KEYS = {"name", "type", "low", "high", "log", "step", "choices", "when"}


class SpaceError(ServiceError):
    """An invalid search space (400, with a detail naming the parameter)."""


def _number(value, what: str, *, integer: bool) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float)
                                                                         and not math.isfinite(value)):
        raise SpaceError(f"{what} must be a finite number.")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise SpaceError(f"{what} must be a whole number.")
        return int(value)
    return float(value)


def _scalar(value) -> bool:
    return value is None or isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value))


def parse_space(raw) -> list[dict]:
    """The normalised list of parameters, or SpaceError."""
    if isinstance(raw, dict):
        entries = []
        for name, spec in raw.items():
            if not isinstance(spec, dict):
                raise SpaceError(f"space.{name}: give a mapping like {{type: float, low: 0.001, high: 0.1}}.")
            if "name" in spec and spec["name"] != name:
                raise SpaceError(f"space.{name}: its `name` differs from its key.")
            entries.append({**spec, "name": name})
    elif isinstance(raw, list):
        entries = raw
    else:
        raise SpaceError("space: give a mapping of parameter name to its range or choices.")
    if not entries:
        raise SpaceError("space: the search space is empty; give at least one parameter.")
    if len(entries) > MAX_PARAMS:
        raise SpaceError(f"space: at most {MAX_PARAMS} parameters.")
    out: list[dict] = []
    seen: dict[str, dict] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise SpaceError("space: every parameter is a mapping with `name` and `type`.")
        name = entry.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise SpaceError(f"space: parameter name {str(name)[:70]!r} is invalid: 1-64 letters, digits, _ . -, "
                             "starting with a letter or _.")
        where = f"space.{name}"
        if name in seen:
            raise SpaceError(f"{where}: the parameter is given twice.")
        unknown = sorted(set(entry) - ALLOWED_KEYS)
        if unknown:
            raise SpaceError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: type, low, high, log, step, "
                             "choices, when.")
        kind = entry.get("type")
        if kind not in TYPES:
            raise SpaceError(f"{where}: type must be one of int, float, categorical (got {str(kind)[:30]!r}).")
        param: dict = {"name": name, "type": kind}
        if kind == "categorical":
            choices = entry.get("choices")
            if not isinstance(choices, list) or not choices:
                raise SpaceError(f"{where}: a categorical parameter needs a non-empty list of `choices`.")
            if len(choices) > MAX_CHOICES:
                raise SpaceError(f"{where}: at most {MAX_CHOICES} choices.")
            if not all(_scalar(c) for c in choices):
                raise SpaceError(f"{where}: choices must be strings, numbers, booleans or null.")
            if len({repr(c) for c in choices}) != len(choices):
                raise SpaceError(f"{where}: choices repeat.")
            for extra in ("low", "high", "log", "step"):
                if extra in entry:
                    raise SpaceError(f"{where}: `{extra}` is for int and float parameters, not categorical ones.")
            param["choices"] = choices
        else:
            integer = kind == "int"
            if "choices" in entry:
                raise SpaceError(f"{where}: `choices` is for categorical parameters.")
            if "low" not in entry or "high" not in entry:
                raise SpaceError(f"{where}: a {kind} parameter needs `low` and `high`.")
            low = _number(entry["low"], f"{where}.low", integer=integer)
            high = _number(entry["high"], f"{where}.high", integer=integer)
            if low >= high:
                raise SpaceError(f"{where}: low ({low}) must be below high ({high}).")
            log = entry.get("log", False)
            if not isinstance(log, bool):
                raise SpaceError(f"{where}.log must be true or false.")
            if log and low <= 0:
                raise SpaceError(f"{where}: a log scale needs low > 0 (got {low}).")
            step = entry.get("step")
            if step is not None:
                step = _number(step, f"{where}.step", integer=integer)
                if step <= 0:
                    raise SpaceError(f"{where}.step must be above 0.")
                if step > high - low:
                    raise SpaceError(f"{where}.step ({step}) is larger than the range {low}..{high}.")
                if log and (not integer or step != 1):
                    raise SpaceError(f"{where}: a log scale takes no step.")
            param.update(low=low, high=high, log=log, step=step)
        when = entry.get("when")
        if when is not None:
            if not isinstance(when, dict) or not when:
                raise SpaceError(f"{where}.when: give a mapping {{parameter: value or [values]}}.")
            cond: dict[str, list] = {}
            for other, values in when.items():
                parent = seen.get(other)
                if parent is None:
                    raise SpaceError(f"{where}.when: '{str(other)[:64]}' is not a parameter given before '{name}'.")
                if parent["type"] != "categorical":
                    raise SpaceError(f"{where}.when: '{other}' must be a categorical parameter.")
                values = values if isinstance(values, list) else [values]
                bad = [v for v in values if v not in parent["choices"]]
                if not values or bad:
                    raise SpaceError(f"{where}.when: {bad[0] if bad else values!r} is not a choice of '{other}'.")
                cond[other] = values
            param["when"] = cond
        clash = next((other for other in seen if env_name(other) == env_name(name)), None)
        if clash:
            raise SpaceError(f"{where}: '{name}' and '{clash}' would share the variable {env_name(name)}; rename one.")
        seen[name] = param
        out.append(param)
    return out


def grid_values(param: dict) -> list:
    """Every value grid search tries for one parameter."""
    if param["type"] == "categorical":
        return list(param["choices"])
    if param["type"] == "int":
        step = param.get("step") or 1
        return list(range(param["low"], param["high"] + 1, step))
    step = param.get("step")
    count = int(math.floor((param["high"] - param["low"]) / step + 1e-9)) + 1
    return [round(param["low"] + i * step, 12) for i in range(count)]


def check_grid(space: list[dict]) -> int:
    """The number of grid points, or SpaceError when the space cannot be enumerated."""
    total = 1
    for param in space:
        where = f"space.{param['name']}"
        if param.get("when"):
            raise SpaceError(f"{where}: grid search takes no conditional parameters; use random or tpe.")
        if param["type"] == "float" and not param.get("step"):
            raise SpaceError(f"{where}: grid search needs a `step` for float parameters (or make it categorical).")
        if param.get("log"):
            raise SpaceError(f"{where}: grid search takes no log scale; list the values as categorical choices.")
        total *= len(grid_values(param))
        if total > MAX_GRID:
            raise SpaceError(f"space: the grid has more than {MAX_GRID} points.")
    return total


def grid_search_space(space: list[dict]) -> dict[str, list]:
    return {param["name"]: grid_values(param) for param in space}


def active(param: dict, params: dict) -> bool:
    return all(params.get(other) in values for other, values in (param.get("when") or {}).items())


def suggest(trial, space: list[dict], *, grid: bool) -> dict:
    """Ask Optuna's trial for each parameter of the space (define-by-run: conditional ones only
    when their condition holds). Returns {name: value}."""
    params: dict = {}
    for param in space:
        if not active(param, params):
            continue
        name = param["name"]
        if grid or param["type"] == "categorical":
            params[name] = trial.suggest_categorical(name, grid_values(param) if grid else param["choices"])
        elif param["type"] == "int":
            params[name] = trial.suggest_int(name, param["low"], param["high"], step=param.get("step") or 1,
                                             log=param["log"])
        else:
            params[name] = trial.suggest_float(name, param["low"], param["high"], step=param.get("step"),
                                               log=param["log"])
    return params


def env_name(name: str) -> str:
    """The environment variable a parameter is given in: PARAM_<NAME> (upper case, . and - as _)."""
    return "PARAM_" + re.sub(r"[^A-Za-z0-9_]", "_", name).upper()


def env_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def combinations(space: list[dict]) -> list[dict]:
    """Every grid point (tests and the benchmark use it)."""
    names = [p["name"] for p in space]
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(grid_values(p) for p in space))]
