"""job.yaml: what `cairn submit` reads.

    kind: training            # training | notebook | deployment (default: training)
    project: vision           # optional; else --project, CAIRN_PROJECT or the config file
    name: mnist
    command: python train.py --epochs 3
    replicas: 2
    resources: {gpu: 0, cpu: 1, memory: 1Gi}
    env: {LR: "0.01"}
    max_runtime: 2h           # run-time limit: 90m, 2h, 1h30m, 1d or H:MM:SS (sent as max_runtime_seconds)

Everything but `kind` and `project` is the POST body (`max_runtime` is turned into seconds). Only the obvious is checked here (the
file, YAML, a mapping, a known kind, JSON-able values); the server validates the rest and its
field errors are shown as they come.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cairn import yamlsafe


class JobSpecError(Exception):
    """The job file cannot be used; the message names the file and the problem."""


_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_CLOCK_RE = re.compile(r"(\d+):([0-5]\d):([0-5]\d)")
DURATION_HELP = "a duration like 90m, 2h, 1h30m, 1d or H:MM:SS"


def parse_duration(text: str) -> int:
    """'2h' -> 7200, '1h30m' -> 5400, '90m' -> 5400, '1d' -> 86400, '2:30:00' -> 9000 (seconds).

    A bare number is refused rather than guessed: Slurm reads `--time 120` as minutes, Cairn's
    API counts seconds. Raises ValueError with a message meant for users."""
    value = str(text).strip().lower().replace(" ", "")
    clock = _CLOCK_RE.fullmatch(value)
    if clock:
        hours, minutes, seconds = (int(part) for part in clock.groups())
        return hours * 3600 + minutes * 60 + seconds
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        raise ValueError(f"{text!r} has no unit: write {value}s, {value}m or {value}h")
    parts = _DURATION_RE.findall(value)
    units = [unit for _, unit in parts]
    if (not parts or "".join(number + unit for number, unit in parts) != value
            or len(set(units)) != len(units) or units != sorted(units, key=list(_DURATION_UNITS).index)):
        raise ValueError(f"expected {DURATION_HELP}, got {text!r}")
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    if not seconds.is_integer():
        raise ValueError(f"{text!r} is not a whole number of seconds")
    return int(seconds)


@dataclass
class JobSpec:
    kind: str
    project: str | None
    body: dict[str, Any]
    source: str


def _env_value(value: Any) -> Any:
    """YAML turns `LR: 0.01` into a float and `DEBUG: true` into a bool; env values are text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def parse_job(text: str, source: str = "<job>") -> JobSpec:
    try:
        data = yamlsafe.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise JobSpecError(f"{source}: invalid YAML{where}: {problem}") from None
    if data is None:
        raise JobSpecError(f"{source}: the file is empty")
    if not isinstance(data, dict):
        raise JobSpecError(
            f"{source}: expected a mapping of fields (e.g. `name: mnist`), "
            f"got a {type(data).__name__}"
        )
    bad_keys = [repr(k) for k in data if not isinstance(k, str)]
    if bad_keys:
        raise JobSpecError(f"{source}: field names must be text, got {', '.join(bad_keys)}")

    body = dict(data)
    kind = body.pop("kind", None) or "training"
    # Which kinds exist is the server's to say (Client.kinds); here only the form is checked.
    if not isinstance(kind, str) or not kind.strip():
        raise JobSpecError(f"{source}: `kind` must be the name of a workload kind, got {kind!r}")
    kind = kind.strip().lower()

    project = body.pop("project", None)
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise JobSpecError(f"{source}: `project` must be a project slug, got {project!r}")

    command = body.get("command")
    if command is not None:
        if isinstance(command, list):
            if not command or not all(isinstance(part, (str, int, float)) for part in command):
                raise JobSpecError(f"{source}: `command` must be a string or a list of strings")
            body["command"] = [str(part) for part in command]
        elif not isinstance(command, str):
            raise JobSpecError(f"{source}: `command` must be a string or a list of strings")

    env = body.get("env")
    if env is not None:
        if not isinstance(env, dict):
            raise JobSpecError(f"{source}: `env` must be a mapping of NAME: value")
        body["env"] = {str(k): _env_value(v) for k, v in env.items()}

    if "max_runtime" in body:
        limit = body.pop("max_runtime")
        if "max_runtime_seconds" in body:
            raise JobSpecError(f"{source}: give either `max_runtime` or `max_runtime_seconds`, not both")
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, str):
                raise JobSpecError(f"{source}: `max_runtime` must be {DURATION_HELP} (e.g. `max_runtime: 2h`), "
                                   f"or give `max_runtime_seconds` as a number, got {limit!r}")
            try:
                body["max_runtime_seconds"] = parse_duration(limit)
            except ValueError as exc:
                raise JobSpecError(f"{source}: `max_runtime`: {exc}") from None

    try:
        json.dumps(body)
    except (TypeError, ValueError) as exc:
        raise JobSpecError(
            f"{source}: a value cannot be sent as JSON ({exc}); quote dates and other "
            "special values"
        ) from None
    return JobSpec(kind=kind, project=project.strip() if project else None, body=body,
                   source=source)


def load_job_file(path: str) -> JobSpec:
    """Read and check a job file; "-" reads standard input."""
    if path == "-":
        return parse_job(sys.stdin.read(), "<stdin>")
    file = Path(path).expanduser()
    if not file.exists():
        raise JobSpecError(f"{path}: no such file")
    if file.is_dir():
        raise JobSpecError(f"{path}: is a directory, expected a YAML file")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JobSpecError(f"{path}: cannot read it ({exc})") from None
    return parse_job(text, path)
