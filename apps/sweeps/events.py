"""Realtime payloads of sweeps (the `sweeps` and `sweep:<id>` live topics, apps/sweeps/topics.py).

They say what changed, not the whole row: the dashboard re-reads the sweep or its trials through
the API (one source of truth, the same serializers). Published after commit."""
from __future__ import annotations

from apps.core.realtime import publish


def sweeps_group(project_id: int) -> str:
    """Every sweep change of one project (its own group: the workload topics never see them)."""
    return f"project-sweeps.{project_id}"


def sweep_changed(*, project_id: int, sweep_id: int, status: str) -> None:
    """The sweep was created or its status (or message) changed."""
    publish(sweeps_group(project_id), {"type": "sweep.changed", "sweep": sweep_id, "status": status})


def trial_changed(*, project_id: int, sweep_id: int, number: int, status: str) -> None:
    """A trial was asked, linked to a workload, reported a value, or ended."""
    publish(sweeps_group(project_id), {"type": "sweep.trial", "sweep": sweep_id, "trial": number, "status": status})


def sweep_deleted(*, project_id: int, sweep_id: int) -> None:
    publish(sweeps_group(project_id), {"type": "sweep.deleted", "sweep": sweep_id})
