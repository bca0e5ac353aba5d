"""sweep.yaml: what `cairn sweep create` reads (examples/sweep_digits.yaml, docs/sweeps.md).

    name: digits-mlp
    project: vision            # optional; else --project, CAIRN_PROJECT or the config file
    objective: {metric: val_acc, direction: maximize}
    algorithm: asha            # grid | random | tpe | asha
    space: {lr: {type: float, low: 1.0e-4, high: 0.1, log: true}, ...}
    budget: {max_trials: 24}   # and/or max_gpu_hours
    max_concurrent: 2
    template:                  # a training job as in job.yaml (command, resources, env, max_runtime, ...)
      command: python train.py

Everything but `project` is the POST body; the template is read like a job file (a command
string or list, env values as text, `max_runtime: 10m` turned into seconds). The server
checks the rest and answers what is wrong.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cairn import yamlsafe
from cairn.jobspec import JobSpecError, parse_job


@dataclass
class SweepSpec:
    project: str | None
    body: dict[str, Any]
    source: str


def parse_sweep(text: str, source: str = "<sweep>") -> SweepSpec:
    try:
        data = yamlsafe.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise JobSpecError(f"{source}: invalid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise JobSpecError(f"{source}: expected a mapping of fields (name, objective, space, budget, template, ...)")
    body = dict(data)
    project = body.pop("project", None)
    if project is not None and (not isinstance(project, str) or not project.strip()):
        raise JobSpecError(f"{source}: `project` must be a project slug, got {project!r}")
    template = body.get("template")
    if not isinstance(template, dict):
        raise JobSpecError(f"{source}: `template` must be a training job (a mapping with at least `command`)")
    if template.get("kind", "training") != "training":
        raise JobSpecError(f"{source}: a sweep's trials are training jobs; remove `kind` from the template")
    try:
        job = parse_job(json.dumps(template, default=str), f"{source}: template")
    except (TypeError, ValueError) as exc:
        raise JobSpecError(f"{source}: template: {exc}") from None
    body["template"] = job.body
    try:
        json.dumps(body)
    except (TypeError, ValueError) as exc:
        raise JobSpecError(f"{source}: a value cannot be sent as JSON ({exc})") from None
    return SweepSpec(project=project.strip() if project else None, body=body, source=source)


def load_sweep_file(path: str) -> SweepSpec:
    if path == "-":
        return parse_sweep(sys.stdin.read(), "<stdin>")
    file = Path(path).expanduser()
    if not file.is_file():
        raise JobSpecError(f"{path}: no such file")
    try:
        return parse_sweep(file.read_text(encoding="utf-8"), path)
    except (OSError, UnicodeDecodeError) as exc:
        raise JobSpecError(f"{path}: cannot read it ({exc})") from None
