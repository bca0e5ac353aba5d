"""Helpers for local-backend tests: admitted workloads, reconcile-until, process checks."""
import os
import signal
import time
from pathlib import Path

import psutil
from django.utils import timezone

from apps.backends.local.reconciler import reconcile_once
from apps.workloads.choices import WorkloadStatus
from tests.factories import WorkloadFactory

S = WorkloadStatus

# A replica that saves a checkpoint and exits cleanly on SIGTERM (a graceful stop or preemption).
CHECKPOINT_ON_SIGTERM = """
    import signal, sys, time
    def on_term(signum, frame):
        print("checkpoint saved", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    time.sleep(120)
"""


def kill_processes_mentioning(text: str) -> None:
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if not any(text in part for part in proc.info["cmdline"] or []):
                continue
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (psutil.Error, OSError):
            continue


def admitted(*, replicas: int = 1, **fields):
    """A workload the scheduler has just admitted (placement on one node), not dispatched yet."""
    return WorkloadFactory(
        status=S.ADMITTED, replicas=replicas, admitted_at=timezone.now(),
        placement=[{"replica": i, "node": "node-a"} for i in range(replicas)], **fields,
    )


def reconcile_until(workload, statuses, *, timeout: float = 30.0, condition=None):
    """Run reconcile passes until the workload is in one of `statuses` (and `condition(w)` holds)."""
    statuses = {statuses} if isinstance(statuses, str) else set(statuses)
    deadline = time.monotonic() + timeout
    while True:
        reconcile_once()
        workload.refresh_from_db()
        if workload.status in statuses and (condition is None or condition(workload)):
            return workload
        if time.monotonic() > deadline:
            raise AssertionError(
                f"workload {workload.pk} is {workload.status} ({workload.status_reason}: {workload.status_message}), "
                f"wanted {statuses}; events: {list(workload.events.values_list('reason', 'message'))}"
            )
        time.sleep(0.05)


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def processes_per_replica() -> int:
    """A shim and the command; in a bubblewrap sandbox also bwrap and the sandbox's init."""
    from apps.backends.local import sandbox

    return 4 if sandbox.isolation().level in (sandbox.BWRAP, sandbox.BWRAP_ROOT) else 2


def is_replica_command(proc: psutil.Process) -> bool:
    """Not a shim (python -I -S shim.py) nor bubblewrap."""
    try:
        return proc.name() != "bwrap" and "-S" not in proc.cmdline()
    except psutil.Error:
        return False


def replica_processes(workload) -> list[psutil.Process]:
    """The shim and command processes of the workload's current attempt that are alive."""
    found = []
    for record in (workload.runtime or {}).get("replicas", []):
        try:
            shim = psutil.Process(record["pid"])
            if abs(shim.create_time() - record["create_time"]) > 0.05:
                continue
            found += [p for p in [shim, *shim.children(recursive=True)] if p.status() != psutil.STATUS_ZOMBIE]
        except psutil.Error:
            continue
    return found


def gone(processes) -> bool:
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def log_file(workload, *, attempt: int, replica: int = 0) -> Path:
    from apps.backends.local.paths import replica_log_path

    return replica_log_path(workload.pk, attempt, replica)
