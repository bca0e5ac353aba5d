"""Realtime payloads and groups of tracking. Sent after commit through apps.core.realtime."""
from __future__ import annotations


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def project_runs_group(project_id: int) -> str:
    return f"project-runs.{project_id}"


def metrics_event(*, run_id: int, points: list[tuple[str, int, float, float]] | None = None,
                  by_key: dict[str, list[tuple[int, float, float]]] | None = None) -> dict:
    """All points of a batch, grouped by key: {"loss": [[step, value, time], ...]}. `by_key`, when
    the caller has the points grouped already (rows may be tuples: they travel as arrays)."""
    if by_key is None:
        by_key = {}
        for key, step, value, when in points or ():
            by_key.setdefault(key, []).append([step, value, when])
    return {"type": "run.metrics", "run": run_id, "points": by_key}


def summary_event(*, run_id: int, points: list[tuple[str, int, float, float]] | None = None,
                  latest: dict[str, list] | None = None) -> dict:
    """The latest point per key of a batch, for project-wide views (run tables, sparklines)."""
    if latest is None:
        latest = {}
        for key, step, value, when in points or ():
            current = latest.get(key)
            if current is None or step >= current[0]:
                latest[key] = [step, value, when]
    return {"type": "run.latest", "run": run_id, "latest": latest}


def status_event(*, run_id: int, status: str) -> dict:
    return {"type": "run.status", "run": run_id, "status": status}
