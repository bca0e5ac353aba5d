"""A clean Ctrl-C of the embedded server takes its replicas down and stops their workloads: they
end STOPPED (reason ServerShutdown, with an event saying so) and the next start leaves them be."""
import time

import pytest

from apps.backends.local.reconciler import local_backend_shutdown, reconcile_once
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from apps.workloads.services import workload_stop
from tests.backends.helpers import admitted, gone, processes_per_replica, replica_processes, wait_for

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_shutdown_terminates_owned_replicas_and_stops_their_workloads(script):
    polite = script("""
        import time
        print("ready", flush=True)
        time.sleep(60)
    """)
    stubborn = script("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """)
    running = admitted(name="polite", spec={"command": ["python", polite], "env": {}}, max_restarts=3)
    ignoring = admitted(name="stubborn", spec={"command": ["python", stubborn], "env": {}})
    stopping = admitted(name="stopping", spec={"command": ["python", polite], "env": {}})
    workloads = (running, ignoring, stopping)
    for workload in workloads:
        workload_dispatch(workload_id=workload.pk)
        workload.refresh_from_db()
        wait_for(lambda w=workload: "ready" in workload_log_read(workload=w), what="ready")
    workload_stop(workload=stopping)
    processes = [p for w in workloads for p in replica_processes(w)]
    assert len(processes) == 3 * processes_per_replica()

    started = time.monotonic()
    assert local_backend_shutdown(grace_seconds=1.0) == 3
    assert 1.0 <= time.monotonic() - started < 8
    assert gone(processes)
    for workload in workloads:
        workload.refresh_from_db()
        assert workload.runtime["alive"] is False
    assert running.status == ignoring.status == S.STOPPED
    for workload in (running, ignoring):
        assert workload.status_reason == "ServerShutdown"
        event = workload.events.get(reason="ServerShutdown", to_status=S.STOPPED)
        assert "Stopped because Cairn (embedded) was shut down" in event.message and "resubmit" in event.message
        assert event.type == "Warning"
    assert stopping.status == S.STOPPED and stopping.status_reason == "Stopped"

    # The next start (a reconciler pass, as `make run` runs) does not start them again, even
    # with restarts left.
    for _ in range(3):
        reconcile_once()
    for workload in workloads:
        workload.refresh_from_db()
        assert workload.status == S.STOPPED and workload.attempt == 1
    assert not any(replica_processes(w) for w in workloads)
