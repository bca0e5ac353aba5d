"""A gang is launched at most once per attempt, whatever is killed when (issue 25, item 6).

A real Celery worker process (Redis broker) dispatches an 8-replica gang and is SIGKILLed the
moment the first replica has started, i.e. in the middle of the launch. The reconciler then
resumes the launch: the replicas already started are adopted, the missing ones started, so
every (attempt, replica) is started exactly once, all share the attempt's master port and run
token (which is committed with the claim, before any replica starts), and the gang finishes.

Before the durable claim, the launch ran inside one transaction: the kill rolled it back, the
reconciler launched attempt 1 again and killed the first launch's replicas (a gang launched
twice; their run token did not even exist any more).
"""
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from apps.backends.local.paths import replica_record_path
from apps.backends.tasks import workload_dispatch_task
from apps.tracking.authentication import run_token_find
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload
from tests.backends.helpers import reconcile_until, wait_for
from tests.factories import WorkloadFactory
from tests.processes import cairn_env, celery_worker

S = WorkloadStatus
REPLICAS = 8

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

# Each replica writes one line when it starts, then waits for the test's go file.
REPLICA = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(" ".join([os.environ["CAIRN_ATTEMPT"], os.environ["CAIRN_REPLICA"], str(os.getpid()),
                      os.environ["MASTER_PORT"], os.environ.get("CAIRN_RUN_TOKEN", "")]) + "\\n")
deadline = time.time() + 600  # the test's teardown kills it long before
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
"""


def _gang(pool, shared_dir: Path, n: int):
    script = shared_dir / "replica.py"
    script.write_text(REPLICA)
    starts, go = shared_dir / f"starts-{n}.txt", shared_dir / f"go-{n}"
    workload = WorkloadFactory(
        pool=pool, status=S.ADMITTED, replicas=REPLICAS, admitted_at=timezone.now(),
        placement=[{"replica": i, "node": "node-a"} for i in range(REPLICAS)],
        spec={"command": ["python", str(script), str(starts), str(go)], "env": {}},
    )
    return workload, starts, go


def _starts(path: Path) -> list[list[str]]:
    return [line.split(" ") for line in path.read_text().splitlines()] if path.exists() else []


def test_worker_killed_mid_dispatch_never_launches_a_replica_twice(settings, pool, shared_dir, tmp_path):
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 2}
    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    env = cairn_env(REDIS_URL=django_settings.REDIS_URL, CAIRN_MODE="server")
    mid_launch = None
    # The kill lands mid-launch on the first try on any machine we know of; a fast machine that
    # finished all eight in between gets another two tries (each try is a valid crash test too).
    for n in range(3):
        workload, starts, go = _gang(pool, shared_dir, n)
        worker = celery_worker(env, tmp_path / f"worker-{n}.log")
        try:
            workload_dispatch_task.apply_async(args=[workload.pk], retry=False)
            first = replica_record_path(workload.pk, 1, 0)
            wait_for(lambda first=first, worker=worker: first.exists() or worker.popen.poll() is not None,
                     timeout=120, interval=0.002,
                     what="the first replica to start")
            os.killpg(worker.popen.pid, signal.SIGKILL)
            worker.popen.wait(10)
        finally:
            worker.stop()
        workload.refresh_from_db()
        started_before = len(list(replica_record_path(workload.pk, 1, 0).parent.glob("replica-*.json")))
        # The claim was committed before any replica started: attempt 1, with who was launching it.
        assert workload.attempt == 1, worker.output()
        if workload.status == S.ADMITTED:
            assert workload.runtime["launching"]["owner"]["pid"] == worker.popen.pid
            mid_launch = (workload, starts, go, started_before)
            break
        assert workload.status == S.RUNNING  # killed after the launch committed: nothing to resume
        go.touch()
    assert mid_launch is not None, "the worker was never killed in the middle of a launch"
    workload, starts, go, started_before = mid_launch

    workload = reconcile_until(workload, S.RUNNING, timeout=60)  # the reconciler resumes the launch
    wait_for(lambda: len(_starts(starts)) >= REPLICAS, timeout=60, what="every replica to start")
    time.sleep(0.5)  # a replica started twice would have written its line by now
    lines = _starts(starts)
    started = [(attempt, replica) for attempt, replica, *_ in lines]
    assert sorted(started) == sorted(("1", str(r)) for r in range(REPLICAS)), lines  # each exactly once
    assert len({master_port for *_, master_port, _ in lines}) == 1  # one gang: one rendezvous
    tokens = {token for *_, token in lines}
    assert len(tokens) == 1 and run_token_find(tokens.pop()) is not None  # the token outlived the kill
    assert workload.attempt == 1 and "launching" not in workload.runtime
    assert sorted(r["replica"] for r in workload.runtime["replicas"]) == list(range(REPLICAS))
    reasons = list(workload.events.values_list("reason", flat=True))
    assert "LaunchResumed" in reasons and reasons.count("Started") == 1
    assert 0 < started_before <= REPLICAS

    go.touch()
    workload = reconcile_until(workload, S.SUCCEEDED, timeout=60)
    assert workload.attempt == 1
    assert Workload.objects.get(pk=workload.pk).exit_code == 0


def test_a_replica_whose_record_was_never_written_is_adopted_by_its_command_line(pool, shared_dir, settings):
    """The launcher died between starting a replica and writing its record: the next launch of
    the attempt finds the replica's supervisor by its command line and does not start it again."""
    from apps.backends.local.backend import LocalBackend

    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    workload, starts, go = _gang(pool, shared_dir, 9)
    backend = LocalBackend()
    first = backend.launch(workload, attempt=1)
    wait_for(lambda: len(_starts(starts)) == REPLICAS, timeout=60, what="every replica to start")
    for replica in (0, 3):
        replica_record_path(workload.pk, 1, replica).unlink()
    again = backend.launch(workload, attempt=1)
    assert [(r["replica"], r["pid"]) for r in again["replicas"]] == [(r["replica"], r["pid"]) for r in first["replicas"]]
    time.sleep(0.5)
    assert len(_starts(starts)) == REPLICAS  # nothing started twice
    go.touch()


def test_a_foreign_process_with_the_same_tags_is_not_adopted(pool, shared_dir, tmp_path):
    """Another Cairn on the machine (another data directory) has a workload 1, attempt 1, replica 0
    too: its process is not taken for ours, even when ours left no record."""
    import subprocess
    import sys

    from apps.backends.local.backend import LocalBackend
    from apps.backends.local.paths import replica_exit_path

    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    workload, starts, go = _gang(pool, shared_dir, 10)
    workload.replicas = 1
    tags = {"CAIRN_WORKLOAD_ID": str(workload.pk), "CAIRN_ATTEMPT": "1", "CAIRN_REPLICA": "0"}
    foreign = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path / "elsewhere" / "replica-0.exit")],
        env={**os.environ, **tags}, start_new_session=True)
    try:
        assert not replica_exit_path(workload.pk, 1, 0).exists()
        runtime = LocalBackend().launch(workload, attempt=1)
        assert runtime["replicas"][0]["pid"] != foreign.pid
        wait_for(lambda: len(_starts(starts)) == 1, timeout=60, what="our replica to start")
    finally:
        foreign.kill()
        foreign.wait()
        go.touch()


def test_a_claim_of_a_live_process_that_lost_its_database_is_taken_over(pool, shared_dir):
    """PostgreSQL restarted while a worker launched: the worker lives on, its claim stays. A
    reconciler that gets the row lock (a launching worker would hold it) takes over a claim older
    than CLAIM_GRACE; a fresh one it leaves alone."""
    import subprocess
    import sys

    from apps.backends import services
    from apps.backends.identity import process_identity
    from apps.backends.local.reconciler import reconcile_once

    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    workload, starts, go = _gang(pool, shared_dir, 11)
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        identity = {**process_identity(), "pid": owner.pid, "create_time": psutil.Process(owner.pid).create_time()}
        claim = {"token": "t", "owner": identity, "at": time.time(), "placement": workload.placement, "env": {}}
        Workload.objects.filter(pk=workload.pk).update(attempt=1, runtime={
            "backend": "local", "attempt": 1, "replicas": [], "alive": True, "launching": claim})
        reconcile_once()
        workload.refresh_from_db()
        assert workload.status == S.ADMITTED and workload.runtime["launching"]["token"] == "t"  # fresh: left alone
        claim["at"] = time.time() - services.CLAIM_GRACE - 1
        Workload.objects.filter(pk=workload.pk).update(runtime={**workload.runtime, "launching": claim})
        workload = reconcile_until(workload, S.RUNNING, timeout=60)
        assert workload.attempt == 1 and "LaunchResumed" in workload.events.values_list("reason", flat=True)
    finally:
        owner.kill()
        owner.wait()
        go.touch()


def test_a_claim_whose_row_is_busy_for_a_moment_is_still_launched_by_its_claimer(pool, shared_dir, monkeypatch):
    """The reconciler claims (skip_locked) and, before it launches, another transaction holds the
    row for a moment (the in-process dispatch task of the same workload, seen in the sweeps e2e
    test). The claimer must wait for the row and launch: passing over it left a live claim that
    kept every dispatcher away for LAUNCH_CLAIM_TIMEOUT (300 s)."""
    import threading

    from django.db import close_old_connections, transaction

    from apps.backends import services
    from apps.workloads.lifecycle import workload_locked

    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    workload, starts, go = _gang(pool, shared_dir, 21)
    go.touch()
    locked, release = threading.Event(), threading.Event()

    def hold_the_row():
        try:
            with transaction.atomic():
                workload_locked(workload.pk)
                locked.set()
                release.wait(10)
        finally:
            close_old_connections()

    claim_attempt = services._claim_attempt

    def claim_then_someone_locks(w):
        claim = claim_attempt(w)
        holder = threading.Thread(target=hold_the_row, daemon=True)
        transaction.on_commit(lambda: (holder.start(), locked.wait(10), threading.Timer(1.0, release.set).start()))
        return claim

    monkeypatch.setattr(services, "_claim_attempt", claim_then_someone_locks)
    services.workload_dispatch(workload_id=workload.pk, skip_locked=True)
    workload.refresh_from_db()
    assert locked.is_set()
    assert workload.status == S.RUNNING and workload.attempt == 1
    wait_for(lambda: len(_starts(starts)) == REPLICAS, timeout=60, what="every replica to start")
    reconcile_until(workload, S.SUCCEEDED, timeout=60)


# Attempt 1: replica 0 fails at once, the others wait to be stopped; attempt 2 waits for the go file.
FAILS_FIRST = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(" ".join([os.environ["CAIRN_ATTEMPT"], os.environ["CAIRN_REPLICA"], str(os.getpid()),
                      os.environ["MASTER_PORT"], os.environ.get("CAIRN_RUN_TOKEN", "")]) + "\\n")
if os.environ["CAIRN_ATTEMPT"] == "1" and os.environ["CAIRN_REPLICA"] == "0":
    sys.exit(3)
deadline = time.time() + 600
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
"""


def test_reconciler_killed_mid_restart_never_launches_a_replica_twice(pool, shared_dir, tmp_path):
    """A gang's attempt 1 fails; a real reconciler process restarts it and is SIGKILLed the moment
    the first replica of attempt 2 has started. Attempt 2's claim was committed before that
    replica started, so the next reconciler resumes the same attempt: every replica of attempt 2
    starts exactly once, with one rendezvous and one run token, and the gang finishes.

    Before, the restart launched inside the reconciler's transaction: the kill rolled back the
    new attempt's record, and what had started of it was found only by luck of adoption."""
    from tests.processes import manage

    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    script = shared_dir / "fails-first.py"
    script.write_text(FAILS_FIRST)
    env = cairn_env(CAIRN_MODE="server", CAIRN_RESTART_BACKOFF_SECONDS="0", CAIRN_STOP_GRACE_SECONDS="1",
                    CAIRN_RECONCILER_INTERVAL="0.05")
    mid_restart = None
    for n in range(3):  # as above: a machine that finished the launch first gets another try
        starts, go = shared_dir / f"restart-starts-{n}.txt", shared_dir / f"restart-go-{n}"
        workload = WorkloadFactory(
            pool=pool, status=S.ADMITTED, replicas=REPLICAS, admitted_at=timezone.now(), max_restarts=1,
            placement=[{"replica": i, "node": "node-a"} for i in range(REPLICAS)],
            spec={"command": ["python", str(script), str(starts), str(go)], "env": {}},
        )
        reconciler = manage("run_reconciler", "--backend", "local", env=env, log=tmp_path / f"reconciler-{n}.log")
        try:
            first = replica_record_path(workload.pk, 2, 0)
            wait_for(lambda first=first, r=reconciler: first.exists() or r.popen.poll() is not None,
                     timeout=120, interval=0.002, what="the first replica of attempt 2 to start")
            os.killpg(reconciler.popen.pid, signal.SIGKILL)
            reconciler.popen.wait(10)
        finally:
            reconciler.stop()
        workload.refresh_from_db()
        assert workload.status == S.RUNNING and workload.attempt == 2, reconciler.output()
        if "launching" in workload.runtime:
            assert workload.runtime["launching"]["owner"]["pid"] == reconciler.popen.pid
            mid_restart = (workload, starts, go)
            break
        go.touch()  # killed after the restart was recorded: nothing to resume
    assert mid_restart is not None, "the reconciler was never killed in the middle of a restart"
    workload, starts, go = mid_restart

    workload = reconcile_until(workload, S.RUNNING, timeout=60, condition=lambda w: "launching" not in w.runtime)
    wait_for(lambda: len([x for x in _starts(starts) if x[0] == "2"]) >= REPLICAS, timeout=60,
             what="every replica of attempt 2 to start")
    time.sleep(0.5)  # a replica started twice would have written its line by now
    lines = [line for line in _starts(starts) if line[0] == "2"]
    assert sorted(replica for _, replica, *_ in lines) == sorted(str(r) for r in range(REPLICAS)), lines
    assert len({master_port for *_, master_port, _ in lines}) == 1
    tokens = {token for *_, token in lines}
    assert len(tokens) == 1 and run_token_find(tokens.pop()) is not None
    assert sorted(r["replica"] for r in workload.runtime["replicas"]) == list(range(REPLICAS))
    assert "LaunchResumed" in workload.events.values_list("reason", flat=True)

    go.touch()
    workload = reconcile_until(workload, S.SUCCEEDED, timeout=60)
    assert workload.attempt == 2


def test_a_claim_of_this_process_that_no_thread_is_launching_is_resumed_at_once(pool, shared_dir):
    """A launch that failed with the database gone (PostgreSQL restarted mid-launch) could not
    release its claim. The claimer's own next pass resumes it at once; it waited for
    LAUNCH_CLAIM_TIMEOUT (300 s) before, as if a thread of the process were still launching it
    (the chaos run's PostgreSQL scenario had a job ADMITTED for minutes so). A claim a thread of
    the process is launching is left alone."""
    from apps.backends import services
    from apps.backends.local.reconciler import reconcile_once

    pool.allowed_paths = [str(shared_dir)]
    pool.save(update_fields=["allowed_paths"])
    workload, starts, go = _gang(pool, shared_dir, 12)
    go.touch()
    claim = {"token": "left-behind", "owner": services._me(), "at": time.time(), "placement": workload.placement,
             "env": {}}
    Workload.objects.filter(pk=workload.pk).update(attempt=1, runtime={
        "backend": "local", "attempt": 1, "replicas": [], "alive": True, "launching": claim})
    services._launching_here.add("left-behind")  # a thread of ours is launching it: wait
    try:
        reconcile_once()
        workload.refresh_from_db()
        assert workload.status == S.ADMITTED and workload.runtime["launching"]["token"] == "left-behind"
    finally:
        services._launching_here.discard("left-behind")
    reconcile_once()  # nobody is: resume it now
    workload.refresh_from_db()
    assert workload.status == S.RUNNING and workload.attempt == 1
    assert "LaunchResumed" in workload.events.values_list("reason", flat=True)
