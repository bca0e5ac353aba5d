"""job.yaml: what `cairn submit` reads.

    kind: training            # training | notebook | deployment (default: training)
    project: vision           # optional; else --project, CAIRN_PROJECT or the config file
    name: mnist
    command: python train.py --epochs 3
    replicas: 2
    resources: {gpu: 0, cpu: 1, memory: 1Gi}
    env: {LR: "0.01"}

Everything but `kind` and `project` is the POST body. Only the obvious is checked here (the
file, YAML, a mapping, a known kind, JSON-able values); the server validates the rest and its
field errors are shown as they come.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cairn.client import KINDS


class JobSpecError(Exception):
    """The job file cannot be used; the message names the file and the problem."""


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
        data = yaml.safe_load(text)
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
    if not isinstance(kind, str) or kind.strip().lower() not in KINDS:
        raise JobSpecError(
            f"{source}: unknown kind {kind!r} (expected one of: {', '.join(KINDS)})"
        )
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
