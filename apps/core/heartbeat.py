"""Heartbeats of the long-running loops, for health checks (docker-compose, Kubernetes probes).

Every pass of a loop (`apps.core.loops.run_loop`, the reconciler's loop) touches a file named
after it in CAIRN_HEARTBEAT_DIR (default: <tmp>/cairn-heartbeats); `manage.py healthcheck NAME`
exits 0 while that file is fresh. A pass that fails (the database is down) still beats: the
probe says the loop is alive and turning, not that everything it depends on answers (a restart
would not bring PostgreSQL back).
"""
import os
import tempfile
import time
from pathlib import Path


def heartbeat_dir() -> Path:
    return Path(os.environ.get("CAIRN_HEARTBEAT_DIR") or Path(tempfile.gettempdir()) / "cairn-heartbeats")


def heartbeat(name: str) -> None:
    """Record that loop `name` is turning (never raises: a full disk must not stop a loop)."""
    try:
        directory = heartbeat_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.touch()
        os.utime(path)
    except OSError:
        pass


def heartbeat_age(name: str) -> float | None:
    """Seconds since loop `name` last beat, or None if it never did."""
    try:
        return max(0.0, time.time() - (heartbeat_dir() / name).stat().st_mtime)
    except OSError:
        return None
