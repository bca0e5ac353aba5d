"""Reads: the captured output (stdout + stderr) of a workload's replicas, through the backend of
the workload's cluster (local files, a pod's log, ...)."""
from apps.workloads.logs import LogsUnavailable
from apps.workloads.models import Workload

from .base import BackendUnavailable, LogReader, TransientBackendError, backend_for


def workload_log_read(*, workload: Workload, replica: int = 0, attempt: int | None = None, tail: int | None = None) -> str:
    """The log of one replica of one attempt (None: the latest); tail = only the last N lines.

    '' when there is nothing (not started yet, no such replica or attempt, a backend this
    installation cannot drive). Raises TransientBackendError when the backend's control plane
    keeps failing.
    """
    attempt = workload.attempt if attempt is None else attempt
    if attempt < 1 or replica < 0:
        return ""
    try:
        backend = backend_for(workload)
    except BackendUnavailable:
        return ""
    return backend.logs(workload, replica=replica, attempt=attempt, tail=tail)


def workload_log_text(*, workload: Workload, replica: int = 0, attempt: int | None = None,
                      tail: int | None = None) -> str:
    """workload_log_read for the workloads API (log_access["read"], apps/workloads/logs.py): a
    control plane that keeps failing raises LogsUnavailable (the API answers 503)."""
    try:
        return workload_log_read(workload=workload, replica=replica, attempt=attempt, tail=tail)
    except TransientBackendError as exc:
        raise LogsUnavailable(str(exc)) from exc


class _NoLogReader(LogReader):
    """The reader of a workload whose backend this installation cannot drive: nothing, ever."""

    def read(self, *, final: bool = False) -> str:
        return ""

    def switch(self, attempt: int) -> str:
        self.attempt = attempt
        return ""


def workload_log_reader(*, workload: Workload, replica: int, attempt: int, tail: int | None) -> LogReader:
    """A reader following one replica's log of `attempt`, starting with its last `tail` lines (None:
    all), from the workload's backend (log_access["reader"], apps/workloads/logs.py). May read the
    database: call it in a synchronous context."""
    try:
        backend = backend_for(workload)
    except BackendUnavailable:
        return _NoLogReader(workload_id=workload.pk, replica=replica, attempt=attempt, tail_lines=tail)
    return backend.log_reader(workload, replica=replica, attempt=attempt, tail=tail)
