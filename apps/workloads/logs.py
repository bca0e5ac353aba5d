"""Replica logs, as the workloads API (`GET .../logs/`, api/views.py and api/logtail.py) and the
live log topic read them.

The logs are the backends' (apps.backends, the execution layer above workloads): it fills
`log_access` at AppConfig.ready(), and workloads reads through it without importing it.
  log_access["read"](workload=, replica=, attempt=, tail=) -> str: the log of one replica of one
      attempt (None: the latest), '' when there is none; raises LogsUnavailable when the
      backend's control plane keeps failing.
  log_access["reader"](workload=, replica=, attempt=, tail=) -> a reader following one replica's
      log one bounded step at a time (apps.backends.base.LogReader: read(final=), switch(attempt),
      finish(), .attempt).
"""
from collections.abc import Callable
from typing import Any

log_access: dict[str, Callable[..., Any]] = {}


class LogsUnavailable(Exception):
    """The log could not be read just now (the backend's control plane failed); try again."""
