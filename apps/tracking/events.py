"""Realtime payloads and groups of tracking. Sent after commit through apps.core.realtime."""
from __future__ import annotations


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def project_runs_group(project_id: int) -> str:
    return f"project-runs.{project_id}"


def metrics_event(*, run_id: int, points: list[tuple[str, int, float, float]]) -> dict:
    """All points of a batch, grouped by key: {"loss": [[step, value, time], ...]}."""
    by_key: dict[str, list[list]] = {}
    for key, step, value, when in points:
        by_key.setdefault(key, []).append([step, value, when])
    return {"type": "run.metrics", "run": run_id, "points": by_key}


def summary_event(*, run_id: int, points: list[tuple[str, int, float, float]]) -> dict:
    """The latest point per key of a batch, for project-wide views (run tables, sparklines)."""
    last: dict[str, list] = {}
    for key, step, value, when in points:
        current = last.get(key)
        if current is None or step >= current[0]:
            last[key] = [step, value, when]
    return {"type": "run.latest", "run": run_id, "latest": last}


def status_event(*, run_id: int, status: str) -> dict:
    return {"type": "run.status", "run": run_id, "status": status}
