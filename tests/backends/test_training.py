"""Training jobs on the local backend: gangs of real processes, exits, restarts, dispatch."""
import os
import threading
from pathlib import Path

import psutil
import pytest
from django.db import connection

from apps.backends.local.paths import work_dir
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.backends.tasks import workload_dispatch_task, workload_stop_task
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import (
    admitted,
    gone,
    is_replica_command,
    reconcile_until,
    replica_processes,
    wait_for,
)
from tests.factories import ClusterFactory, PoolFactory, WorkloadFactory

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)

RENDEZVOUS = """
    import os, socket, sys, time
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert world == 2, world
    assert os.environ["MASTER_ADDR"] == "127.0.0.1", os.environ["MASTER_ADDR"]
    port = int(os.environ["MASTER_PORT"])
    assert port > 0
    assert os.environ["LOCAL_RANK"] == str(rank) and os.environ["CAIRN_REPLICA"] == str(rank)
    assert os.environ["NODE_RANK"] == "0" and os.environ["CUDA_VISIBLE_DEVICES"] == ""
    if rank == 0:  # the master waits for rank 1 on MASTER_PORT: both must run at the same time
        server = socket.create_server((os.environ["MASTER_ADDR"], port))
        server.settimeout(30)
        conn, _ = server.accept()
        peer = conn.recv(16).decode()
        print(f"rank 0 of {world}: met rank {peer}")
    else:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=1).sendall(str(rank).encode())
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        print(f"rank {rank} of {world}: joined the master")
    print(f"stderr of rank {rank}", file=sys.stderr)
"""


def test_two_replica_job_runs_as_a_gang_and_succeeds(script):
    workload = admitted(replicas=2, spec={"command": ["python", script(RENDEZVOUS)], "env": {}})

    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    assert workload.attempt == 1
    pids = [r["pid"] for r in workload.runtime["replicas"]]
    assert len(set(pids)) == 2

    reconcile_until(workload, S.SUCCEEDED)
    assert workload.exit_code == 0
    assert workload.attempt == 1
    assert workload.runtime["alive"] is False
    log0 = workload_log_read(workload=workload, replica=0)
    log1 = workload_log_read(workload=workload, replica=1)
    assert "rank 0 of 2: met rank 1" in log0
    assert "rank 1 of 2: joined the master" in log1
    assert "stderr of rank 1" in log1  # stderr is captured with stdout
    assert workload_log_read(workload=workload, replica=1, attempt=1, tail=1) == "stderr of rank 1\n"


def test_failing_job_is_restarted_then_fails_with_its_exit_code(script):
    path = script("""
        import os, sys
        print("attempt", os.environ["CAIRN_ATTEMPT"])
        sys.exit(3)
    """)
    workload = admitted(spec={"command": ["python", path], "env": {}}, max_restarts=2)
    workload_dispatch(workload_id=workload.pk)

    reconcile_until(workload, S.FAILED)
    assert workload.attempt == 3  # launched three times: the first run and two restarts
    assert workload.exit_code == 3
    assert workload.status_reason == "ReplicaFailed"
    assert "Replica 0 exited with code 3" in workload.status_message
    restarts = list(workload.events.filter(reason="Restarting").values_list("message", flat=True))
    assert len(restarts) == 2
    assert all("exited with code 3" in m for m in restarts)
    assert "attempt 2 of 3" in restarts[0] and "attempt 3 of 3" in restarts[1]
    for attempt in (1, 2, 3):
        assert workload_log_read(workload=workload, attempt=attempt) == f"attempt {attempt}\n"


def test_a_failed_replica_takes_down_the_rest_of_the_gang(script):
    path = script("""
        import os, sys, time
        if os.environ["RANK"] == "1":
            time.sleep(0.3)
            sys.exit(5)
        print("rank 0 waiting", flush=True)
        time.sleep(60)
    """)
    workload = admitted(replicas=2, spec={"command": ["python", path], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    processes = replica_processes(workload)

    reconcile_until(workload, S.FAILED)
    assert workload.exit_code == 5
    assert "Replica 1 exited with code 5" in workload.status_message
    assert gone(processes)


def test_dispatch_delivered_twice_launches_once(script):
    path = script("""
        import time
        print("started", flush=True)
        time.sleep(60)
    """)
    workload = admitted(spec={"command": ["python", path], "env": {}})

    def deliver():
        try:
            workload_dispatch_task.run(workload_id=workload.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    workload_dispatch(workload_id=workload.pk)  # and a late redelivery

    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    assert workload.attempt == 1
    assert workload.events.filter(reason="Started").count() == 1
    log = wait_for(lambda: (workload_log_read(workload=workload) or None), what="the replica's output")
    tagged = [
        p for p in psutil.process_iter()
        if _environ(p).get("CAIRN_WORKLOAD_ID") == str(workload.pk) and is_replica_command(p)
    ]
    assert len(tagged) == 1  # one replica command (shims and bubblewrap excluded)
    assert log == "started\n"
    assert workload_dispatch_task.name == "cairn.workload_dispatch"
    assert workload_stop_task.name == "cairn.workload_stop"


def _environ(proc) -> dict:
    try:
        return proc.environ()
    except psutil.Error:
        return {}


def test_dispatch_only_acts_on_admitted_workloads(script):
    workload = admitted(spec={"command": ["python", "-c", "pass"], "env": {}})
    workload.status = S.QUEUED
    workload.save(update_fields=["status"])
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.QUEUED
    assert workload.attempt == 0
    assert workload_dispatch(workload_id=10**9) is None


def test_reconciler_launches_an_admitted_workload_whose_dispatch_was_lost(script):
    workload = admitted(spec={"command": ["python", "-c", "print('ok')"], "env": {}})
    reconcile_until(workload, S.SUCCEEDED)
    assert workload.attempt == 1
    assert workload_log_read(workload=workload) == "ok\n"


def test_kubernetes_cluster_without_credentials_fails_with_a_clear_reason():
    pool = PoolFactory(name="gpu-k8s", cluster=ClusterFactory(name="k8s", backend="kubernetes"))
    workload = admitted(pool=pool)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.FAILED
    assert workload.status_reason == "LaunchFailed"
    assert "Cluster 'k8s' has no registered credentials" in workload.status_message


def test_missing_working_directory_fails_the_launch(shared_dir):
    workload = admitted(spec={"command": ["python", "-c", "pass"], "env": {}, "working_dir": str(shared_dir / "nope")})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.FAILED
    assert workload.status_reason == "LaunchFailed"
    assert "does not exist" in workload.status_message


def test_command_that_does_not_exist_exits_127(shared_dir):
    workload = admitted(spec={"command": ["no-such-program-xyz"], "env": {}, "working_dir": str(shared_dir)})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.FAILED)
    assert workload.exit_code == 127
    log = workload_log_read(workload=workload)  # said by the shim, or by setpriv in a sandbox
    assert "no-such-program-xyz" in log and ("cannot start" in log or "No such file" in log)


def test_working_dir_in_an_allowed_directory_is_the_cwd_of_each_replica(shared_dir):
    shared = shared_dir  # the folder the test's pool allows (tests/conftest.py)
    workload = admitted(replicas=2, spec={
        "command": ["python", "-c", "import os; open('out-' + os.environ['RANK'], 'w').write('x'); print(os.getcwd())"],
        "env": {}, "working_dir": str(shared)})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED)
    for replica in (0, 1):
        assert workload_log_read(workload=workload, replica=replica).strip() == os.path.realpath(shared)
    assert (shared / "out-0").exists() and (shared / "out-1").exists()


def test_relative_working_dir_is_created_inside_the_workloads_folder(settings):
    workload = admitted(spec={"command": ["python", "-c", "import os; print(os.getcwd())"], "env": {},
                              "working_dir": "runs/first"})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED)
    expected = os.path.realpath(work_dir(workload.pk) / "runs" / "first")
    assert workload_log_read(workload=workload).strip() == expected


@pytest.mark.parametrize("requested", ["/", "/etc", "../../..", "~", "data-folder", "other-work"])
def test_working_dir_outside_the_allowed_directories_fails_the_launch(requested, settings, tmp_path):
    """A spec stored before the API checked it (or written around the API) is checked again at launch."""
    other = WorkloadFactory()
    work_dir(other.pk).mkdir(parents=True)
    requested = {"data-folder": str(settings.CAIRN_DATA_DIR),
                 "other-work": str(work_dir(other.pk))}.get(requested, requested)
    pool = PoolFactory(allowed_paths=[str(tmp_path)])  # holds the data folder: that stays refused
    workload = admitted(pool=pool, spec={"command": ["python", "-c", "open('planted', 'w')"], "env": {},
                                         "working_dir": requested})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.FAILED and workload.status_reason == "LaunchFailed"
    assert "Working directory refused" in workload.status_message
    assert not Path("/planted").exists() and not (work_dir(other.pk) / "planted").exists()


def test_symlink_planted_in_the_work_folder_is_refused_at_launch():
    workload = admitted(spec={"command": ["python", "-c", "open('planted', 'w')"], "env": {}, "working_dir": "etc"})
    work_dir(workload.pk).mkdir(parents=True)
    (work_dir(workload.pk) / "etc").symlink_to("/etc")
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.FAILED and "symbolic link" in workload.status_message
    assert not Path("/etc/planted").exists()
