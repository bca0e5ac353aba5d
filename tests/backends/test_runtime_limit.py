"""Run-time limits on the local backend, with real processes: a job still running at its deadline
is stopped like any other (SIGTERM, SIGKILL after the grace period) and ends FAILED with reason
DeadlineExceeded. The clock is moved instead of waiting: the limit is at least a minute, so each
test puts `started_at` in the past (what a real minute would have done to it)."""
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.backends.local.reconciler import local_backend_shutdown, reconcile_once
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.backends.tasks import workload_stop_task
from apps.core.models import OutboxMessage
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.services import workload_preempt, workload_transition
from tests.backends.helpers import CHECKPOINT_ON_SIGTERM, admitted, gone, reconcile_until, replica_processes, wait_for

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _short_grace(settings):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 1.0}


def _running(workload):
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    # Every replica: one that gets SIGTERM before its handler is installed dies without a word.
    for replica in range(workload.replicas):
        wait_for(lambda replica=replica: "ready" in workload_log_read(workload=workload, replica=replica),
                 what=f"'ready' in replica {replica}'s log")
    return replica_processes(workload)


def _run_for(workload, seconds: float) -> None:
    """As if the current run had been admitted and started `seconds` ago."""
    started = timezone.now() - timedelta(seconds=seconds)
    Workload.objects.filter(pk=workload.pk).update(admitted_at=started - timedelta(seconds=1), started_at=started)


def test_a_job_still_running_at_its_limit_is_stopped_and_fails_with_deadline_exceeded(script):
    workload = admitted(replicas=2, max_runtime_seconds=60, spec={"command": ["python", script(CHECKPOINT_ON_SIGTERM)], "env": {}})
    processes = _running(workload)
    _run_for(workload, 61)

    reconcile_once()
    workload.refresh_from_db()
    assert workload.status == S.STOPPING and workload.status_reason == "DeadlineExceeded"
    assert workload.status_message.startswith("Reached its run-time limit of 1m (running since ")
    assert OutboxMessage.objects.filter(topic="workload.stop", payload={"workload_id": workload.pk}).exists()
    workload_stop_task.run(workload_id=workload.pk)  # the outbox's delivery: SIGTERM was already sent
    reconcile_until(workload, S.FAILED, timeout=10)

    assert gone(processes)
    assert workload.status_reason == "DeadlineExceeded"
    assert workload.status_message == "Stopped after reaching its run-time limit of 1m. All replicas have exited."
    assert workload.exit_code is None and workload.attempt == 1 and workload.runtime["alive"] is False
    assert "checkpoint saved" in workload_log_read(workload=workload, replica=1)
    events = list(workload.events.filter(reason="DeadlineExceeded").values_list("type", "to_status"))
    assert events == [("Warning", S.STOPPING), ("Warning", S.FAILED)]


def test_a_job_within_its_limit_keeps_running(script):
    workload = admitted(max_runtime_seconds=60, spec={"command": ["python", script(CHECKPOINT_ON_SIGTERM)], "env": {}})
    processes = _running(workload)
    _run_for(workload, 50)
    for _ in range(3):
        reconcile_once()
    workload.refresh_from_db()
    assert workload.status == S.RUNNING and not gone(processes)
    assert not WorkloadEvent.objects.filter(workload=workload, reason="DeadlineExceeded").exists()


def test_a_replica_ignoring_sigterm_at_the_deadline_is_killed_after_the_grace_period(script):
    path = script("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)
    workload = admitted(max_runtime_seconds=60, spec={"command": ["python", path], "env": {}})
    processes = _running(workload)
    _run_for(workload, 120)
    reconcile_once()
    stopped_at = time.monotonic()
    reconcile_until(workload, S.FAILED, timeout=10)
    assert time.monotonic() - stopped_at >= 0.9
    assert gone(processes)
    assert workload.status_reason == "DeadlineExceeded"
    assert "killed after the 1s grace period" in workload.status_message


def test_restarts_count_against_the_limit(script):
    """A replica failing after the deadline is not restarted, whatever max_restarts allows."""
    path = script("""
        import sys
        sys.exit(3)
    """)
    workload = admitted(max_runtime_seconds=60, max_restarts=3, spec={"command": ["python", path], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    processes = replica_processes(workload)
    wait_for(lambda: gone(processes), what="the replica to exit")  # failed before any pass saw it run
    _run_for(workload, 90)
    reconcile_until(workload, S.FAILED, timeout=10)
    assert workload.attempt == 1
    assert workload.status_reason == "ReplicaFailed" and workload.exit_code == 3
    assert workload.status_message == "Replica 0 exited with code 3. Not restarted: its run-time limit of 1m has passed."


def test_a_preempted_and_requeued_job_gets_its_full_limit_again_from_its_new_start(script):
    workload = admitted(max_runtime_seconds=60, spec={"command": ["python", script(CHECKPOINT_ON_SIGTERM)], "env": {}})
    _running(workload)
    _run_for(workload, 600)  # long past its limit, but preempted before the reconciler noticed
    assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message="Preempted for a test.")
    reconcile_until(workload, S.QUEUED, timeout=10)
    assert workload.status_reason == "Requeued"

    workload_transition(workload_id=workload.pk, from_statuses={S.QUEUED}, to_status=S.ADMITTED, reason="Admitted",
                        admitted_at=timezone.now(), placement=[{"replica": 0, "node": "node-a"}])
    processes = _running(workload)
    assert workload.attempt == 2
    for _ in range(3):
        reconcile_once()
    workload.refresh_from_db()
    assert workload.status == S.RUNNING and not gone(processes)
    _run_for(workload, 61)  # its second run reaches the limit in turn
    reconcile_until(workload, S.FAILED, timeout=10)
    assert workload.status_reason == "DeadlineExceeded" and gone(processes)


def test_a_job_stopping_at_its_deadline_when_cairn_shuts_down_still_ends_failed(script):
    workload = admitted(max_runtime_seconds=60, spec={"command": ["python", script(CHECKPOINT_ON_SIGTERM)], "env": {}})
    processes = _running(workload)
    _run_for(workload, 61)
    reconcile_once()
    workload.refresh_from_db()
    assert workload.status == S.STOPPING
    local_backend_shutdown(grace_seconds=1.0)
    workload.refresh_from_db()
    assert gone(processes)
    assert workload.status == S.FAILED and workload.status_reason == "DeadlineExceeded"
