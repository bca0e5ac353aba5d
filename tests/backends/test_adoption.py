"""Replicas outlive the Cairn process that started them, and a new reconciler takes them over.

Real `manage.py run_reconciler` processes run against the test database; one is killed with
SIGKILL while jobs run, and a replica is killed while no reconciler is running at all.

Every step waits on its condition with a generous deadline (WAIT): on a loaded machine a
reconciler process takes seconds to start, and the replicas wait for the test as long as it
takes (they are killed at teardown), never on a clock of their own.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest
from django.conf import settings as django_settings

from apps.backends.local.paths import replica_exit_path
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, wait_for

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)

MANAGE = str(Path(django_settings.BASE_DIR) / "manage.py")
WAIT = 180.0  # seconds: a deadline for conditions that take a second on an idle machine

WAIT_FOR_GO = """
    import os, sys, time
    go = sys.argv[1]
    print("attempt", os.environ["CAIRN_ATTEMPT"], "waiting", flush=True)
    deadline = time.time() + 900  # the test's teardown kills it long before
    while not os.path.exists(go):
        if time.time() > deadline:
            sys.exit(9)
        time.sleep(0.05)
    print("done", flush=True)
"""


def _database_url() -> str:
    db = django_settings.DATABASES["default"]
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def start_reconciler(settings, shared_dir):
    started: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start() -> subprocess.Popen:
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "CAIRN_MODE": "server",
            "CAIRN_DATA_DIR": str(settings.CAIRN_DATA_DIR),
            "CAIRN_RECONCILER_INTERVAL": "0.1",
            "CAIRN_STOP_GRACE_SECONDS": "2",
        }
        path = shared_dir / f"reconciler-{len(started)}.log"
        logs.append(path)
        log = open(path, "wb")
        proc = subprocess.Popen(
            [sys.executable, MANAGE, "run_reconciler"], env=env, stdout=log, stderr=subprocess.STDOUT,
            cwd=django_settings.BASE_DIR,
        )
        log.close()
        started.append(proc)
        return proc

    start.logs = logs  # for the failure messages
    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _child(shim_pid: int) -> psutil.Process:
    children = psutil.Process(shim_pid).children()
    assert len(children) == 1
    return children[0]


def _status(workload) -> str:
    workload.refresh_from_db()
    return workload.status


def _until(predicate, *, what: str, workloads=(), logs=()):
    """wait_for with WAIT as the deadline; a timeout says where each workload stood and what the
    reconcilers logged."""
    try:
        return wait_for(predicate, timeout=WAIT, interval=0.1, what=what)
    except AssertionError as exc:
        states = [(w.name, _status(w), w.attempt, w.status_reason, w.status_message) for w in workloads]
        tails = [f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in logs if path.exists()]
        raise AssertionError("\n".join([str(exc), f"workloads: {states}", *tails])) from None


@pytest.mark.timeout(900)
def test_replicas_survive_a_killed_reconciler_and_are_adopted_by_the_next(script, shared_dir, start_reconciler):
    go = shared_dir / "go"
    wait_script = script(WAIT_FOR_GO)
    sleeper = script("""
        import time
        print("sleeping", flush=True)
        time.sleep(900)
    """)
    adopted = admitted(name="adopted", spec={"command": ["python", wait_script, str(go)], "env": {}})
    exited = admitted(name="exited", spec={"command": ["python", sleeper], "env": {}})
    lost = admitted(name="lost", spec={"command": ["python", wait_script, str(go)], "env": {}}, max_restarts=1)
    workloads = (adopted, exited, lost)

    def until(predicate, what):
        return _until(predicate, what=what, workloads=workloads, logs=start_reconciler.logs)

    # 1. The first reconciler finds them ADMITTED (their dispatch never came) and launches them.
    first = start_reconciler()
    until(lambda: all(_status(w) == S.RUNNING for w in workloads), "all three to run")
    shims = {w.name: w.runtime["replicas"][0]["pid"] for w in workloads}
    assert all(w.runtime["owner"]["pid"] == first.pid for w in workloads)
    children = {name: until(lambda pid=pid: psutil.Process(pid).children(), f"the command of {name}")[0]
                for name, pid in shims.items()}

    # 2. kill -9 the reconciler: the replicas keep running.
    first.send_signal(signal.SIGKILL)
    first.wait(WAIT)
    time.sleep(0.3)  # a moment in which a replica tied to the reconciler would have died
    assert all(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
               for pid in shims.values())

    # 3. While no reconciler runs: one command dies (its shim records the exit code), and one
    #    replica dies together with its shim (nothing records anything).
    children["exited"].send_signal(signal.SIGKILL)
    until(lambda: replica_exit_path(exited.pk, 1, 0).exists(), "the exit file")
    os.killpg(shims["lost"], signal.SIGKILL)
    until(lambda: _gone(children["lost"]), "the lost replica to die")
    assert not replica_exit_path(lost.pk, 1, 0).exists()

    # 4. A new reconciler adopts the survivor and sorts out the other two.
    second = start_reconciler()
    until(lambda: adopted.events.filter(reason="Adopted").exists(), "the Adopted event")
    until(lambda: _status(exited) == S.FAILED, "the exited job to fail")
    assert exited.exit_code == 137  # SIGKILL, read from the exit file written while nobody watched
    assert "killed by signal 9" in exited.status_message
    until(lambda: lost.events.filter(reason="Restarting").exists(), "the lost replica to restart")
    until(lambda: _status(lost) == S.RUNNING and lost.attempt == 2, "the lost job's second attempt to run")
    assert "disappeared without an exit code" in lost.events.get(reason="Restarting").message

    go.touch()
    until(lambda: _status(adopted) == S.SUCCEEDED and _status(lost) == S.SUCCEEDED, "both to succeed")
    assert adopted.attempt == 1 and adopted.runtime["replicas"][0]["pid"] == shims["adopted"]  # same process
    assert adopted.runtime["owner"]["pid"] == second.pid
    assert adopted.events.filter(reason="Adopted").count() == 1

    # SIGTERM stops the reconciler cleanly.
    second.send_signal(signal.SIGTERM)
    assert second.wait(WAIT) == 0


def test_lost_replica_without_restarts_left_marks_the_workload_lost(script):
    from apps.backends.local.reconciler import reconcile_once
    from apps.backends.services import workload_dispatch

    path = script("""
        import time
        print("sleeping", flush=True)
        time.sleep(60)
    """)
    workload = admitted(spec={"command": ["python", path], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    shim = workload.runtime["replicas"][0]["pid"]
    wait_for(lambda: psutil.Process(shim).children(), what="the command")
    os.killpg(shim, signal.SIGKILL)
    wait_for(lambda: (reconcile_once() or True) and _status(workload) == S.LOST, what="LOST")
    assert workload.status_reason == "ReplicaLost"
    assert "Replica 0 disappeared" in workload.status_message


def test_a_reused_pid_is_never_taken_for_a_replica(shared_dir):
    """A record whose pid now belongs to another process (other start time) is not ours: it is
    neither observed as running nor signalled."""
    from apps.backends.base import LOST
    from apps.backends.local.backend import LocalBackend

    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        started = psutil.Process(stranger.pid).create_time()
        workload = admitted()
        workload.runtime = {"attempt": 1, "alive": True,
                            "replicas": [{"replica": 0, "pid": stranger.pid, "create_time": started - 100}]}
        backend = LocalBackend()
        assert [s.phase for s in backend.observe(workload)] == [LOST]
        assert backend.signal(workload, force=True) == 0
        time.sleep(0.1)
        assert stranger.poll() is None  # still alive, untouched
        workload.runtime["replicas"][0]["create_time"] = started
        assert backend.observe(workload)[0].alive  # the same pid with its real start time is
    finally:
        stranger.kill()
        stranger.wait()


def _gone(proc: psutil.Process) -> bool:
    """Exited, or a zombie; it may exit between the two questions (NoSuchProcess: gone)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
