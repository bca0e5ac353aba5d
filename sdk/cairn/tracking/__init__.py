"""The in-job logger: `cairn.init()`, `cairn.log()`, `cairn.log_params()`, `cairn.finish()`.

    import cairn
    cairn.init()                       # inside a Cairn job: configured by CAIRN_* variables
    cairn.log_params({"lr": 3e-4})
    for step in range(1000):
        cairn.log({"loss": loss}, step=step)
    cairn.finish()                     # also done at exit

Standalone: `cairn.init(url="http://cairn:8000", project="vision", token="cairn_...", name="sweep-1")`.
Logging never blocks and never raises: points go to a bounded buffer that a background thread
sends in batches, retrying while the server is away.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .run import Run, run_from_env

__all__ = ["Run", "current_run", "finish", "init", "log", "log_params", "progress"]

_current: Run | None = None
_warned = False


def init(**kwargs: Any) -> Run:
    """Start a run (finishing the previous one). See `run_from_env` for the arguments."""
    global _current
    if _current is not None:
        _current.finish()
    _current = run_from_env(**kwargs)
    return _current


def current_run() -> Run | None:
    return _current


def _no_run() -> None:
    global _warned
    if not _warned:
        _warned = True
        import logging

        logging.getLogger("cairn.tracking").warning("cairn: log() before cairn.init(); nothing is recorded")


def log(data: Mapping[str, Any], step: int | None = None) -> None:
    if _current is None:
        _no_run()
        return
    _current.log(data, step=step)


def progress(step: int, seconds: float | None = None) -> None:
    """Report that this rank reached `step` (also done by `log(..., step=)`), and optionally the time
    it spent on that step's own work (`seconds`, without collective waits); Cairn uses it to tell a
    hung or straggling rank. Nothing happens before `cairn.init()`."""
    if _current is not None:
        _current.progress(step, seconds)


def log_params(params: Mapping[str, Any]) -> None:
    if _current is None:
        _no_run()
        return
    _current.log_params(params)


def finish(status: str = "finished", timeout: float = 30.0) -> bool:
    global _current
    if _current is None:
        return True
    run, _current = _current, None
    return run.finish(status=status, timeout=timeout)
