"""Stopping local workloads: SIGTERM through the shim, SIGKILL after the grace period."""
import time

import pytest

from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.backends.tasks import workload_stop_task
from apps.workloads.choices import WorkloadStatus
from apps.workloads.services import workload_stop
from tests.backends.helpers import (
    admitted,
    gone,
    processes_per_replica,
    reconcile_until,
    replica_processes,
    wait_for,
)

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)


def _started(workload, marker="ready"):
    """Dispatch and wait until every replica printed `marker` (its signal handlers are in place).

    Each replica has its own log: waiting on replica 0 alone let the test look for the second
    replica's command before its shim had started it (a flaky failure on a busy machine).
    """
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    for replica in range(workload.replicas):
        wait_for(
            lambda replica=replica: marker in workload_log_read(workload=workload, replica=replica),
            what=f"'{marker}' in replica {replica}'s log",
        )
    processes = replica_processes(workload)
    assert len(processes) == processes_per_replica() * workload.replicas
    return processes


def test_stop_terminates_a_running_job(script):
    path = script("""
        import time
        print("ready", flush=True)
        time.sleep(60)
    """)
    workload = admitted(replicas=2, spec={"command": ["python", path], "env": {}})
    processes = _started(workload)

    workload_stop(workload=workload)
    workload.refresh_from_db()
    assert workload.status == S.STOPPING
    workload_stop_task.run(workload_id=workload.pk)  # what the outbox delivers
    reconcile_until(workload, S.STOPPED, timeout=10)

    assert gone(processes)
    assert workload.status_reason == "Stopped"
    assert workload.runtime["alive"] is False
    assert workload.exit_code is None


def test_a_replica_ignoring_sigterm_is_killed_after_the_grace_period(script, settings):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 1.0}
    path = script("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)
    workload = admitted(spec={"command": ["python", path], "env": {}})
    processes = _started(workload)

    workload_stop(workload=workload)
    signalled_at = time.monotonic()
    assert workload_stop_signal(workload_id=workload.pk) == 1
    assert workload_stop_signal(workload_id=workload.pk) == 0  # a redelivery does not signal twice
    time.sleep(0.5)
    reconcile_until(workload, S.STOPPING)
    assert not gone(processes)  # SIGTERM was ignored and the grace period is not over

    reconcile_until(workload, S.STOPPED, timeout=10)
    assert time.monotonic() - signalled_at >= 1.0
    assert gone(processes)
    assert "killed after the 1s grace period" in workload.status_message


def test_stop_without_the_stop_task_is_still_carried_out_by_the_reconciler(script):
    path = script("""
        import time
        print("ready", flush=True)
        time.sleep(60)
    """)
    workload = admitted(spec={"command": ["python", path], "env": {}})
    processes = _started(workload)
    workload_stop(workload=workload)  # the workload.stop message is never delivered
    reconcile_until(workload, S.STOPPED, timeout=10)
    assert gone(processes)


def test_stopping_an_admitted_workload_before_launch_never_starts_it():
    workload = admitted(spec={"command": ["python", "-c", "pass"], "env": {}})
    workload_stop(workload=workload)
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.STOPPED)
    assert workload.attempt == 0


def test_requeued_workload_has_its_replicas_cleaned_up(script):
    """A workload moved out of RUNNING by someone else (e.g. preempted to QUEUED) loses its processes."""
    from apps.workloads.services import workload_transition

    path = script("""
        import time
        print("ready", flush=True)
        time.sleep(60)
    """)
    workload = admitted(spec={"command": ["python", path], "env": {}})
    processes = _started(workload)
    workload_transition(workload_id=workload.pk, from_statuses={S.RUNNING}, to_status=S.QUEUED, reason="Preempted")
    reconcile_until(workload, S.QUEUED, condition=lambda w: w.runtime["alive"] is False, timeout=15)
    assert gone(processes)
