"""Reads: the captured output (stdout + stderr) of a workload's replicas, through the backend of
the workload's cluster (local files, a pod's log, ...)."""
from apps.workloads.models import Workload

from .base import BackendUnavailable, backend_for


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
