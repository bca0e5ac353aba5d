#!/usr/bin/env python
"""Chaos: Cairn's server mode as separate processes on a real PostgreSQL and Redis, with parts of
it killed while clients submit work. Not a benchmark of speed: it counts what must be zero.

    .venv/bin/python bench/chaos.py                    # every scenario, full size (docs/reliability.md)
    .venv/bin/python bench/chaos.py --reduced          # the small versions the test suite runs
    .venv/bin/python bench/chaos.py --only redis quota # some scenarios
    .venv/bin/python bench/chaos.py --json out.json    # the figures as JSON too

It starts its own throw-away PostgreSQL (initdb, pg_ctl) and Redis (redis-server) on free loopback
ports, since it must kill and restart them, then the stack: one web server (uvicorn), one Celery
worker, two schedulers, the reconciler and the outbox relay, all `config.settings` with
CAIRN_MODE=server; workloads run with the local backend (real processes). Scenarios:

  redis      N submissions from C clients; Redis SIGKILLed when half are accepted, restarted later
  worker     gangs of 4 replicas; the Celery worker SIGKILLed 3 times mid-dispatch (a replica of a
             gang started, not all), restarted each time
  scheduler  the scheduler holding the leader lock SIGKILLed; the standby takes over
  postgres   PostgreSQL stopped (immediate: like a crash) under load and started again
  web        the web server SIGKILLed under load; clients retry with the same Idempotency-Key
  quota      50 concurrent submissions (1-2 GPUs each) against an 8-GPU quota, sampled every 100 ms

Each reports: accepted (distinct workloads the API created for the clients), final (reached a
final state), lost (accepted but never final, or gone: must be 0), created twice (one
Idempotency-Key, two workloads: 0), launched twice (a replica of one attempt started twice: 0),
quota exceeded (samples above the quota: 0) and recover_s: seconds from the end of the fault
(the restart; for the scheduler, the kill) until the next workload status change.

Every replica appends "workload attempt replica" to a starts file when it starts: that is how
"launched twice" is counted, from the replicas' own side.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
FINAL = ("succeeded", "failed", "stopped", "lost")
ACTIVE = ("admitted", "running", "stopping")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")


# -- PostgreSQL and Redis of this run ------------------------------------------------------------

class Services:
    """A PostgreSQL and a Redis for this run only, which the scenarios may kill and restart."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.pg_port, self.redis_port = free_port(), free_port()
        self.pgdata = workdir / "pg"
        self.redis: subprocess.Popen | None = None
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()])
        self.pg_bin = bins[-1] if bins else Path(shutil.which("initdb") or "/nonexistent").parent
        self.pg_user = None
        if os.geteuid() == 0:
            try:
                import pwd
                pwd.getpwnam("postgres")
                self.pg_user = "postgres"
            except KeyError:
                self.pg_user = "nobody"

    @property
    def database_url(self) -> str:
        return f"postgres://cairn@127.0.0.1:{self.pg_port}/cairn"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def _as_pg(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.pg_user, "--", *args] if self.pg_user else list(args)

    def start(self) -> None:
        self.pgdata.mkdir(parents=True)
        if self.pg_user:
            shutil.chown(self.pgdata, self.pg_user)
            os.chmod(self.workdir, 0o755)
        subprocess.run(self._as_pg(str(self.pg_bin / "initdb"), "-D", str(self.pgdata), "-U", "cairn", "--auth=trust",
                                   "--no-sync", "-E", "UTF8"), check=True, capture_output=True)
        self.pg_start()
        with psycopg.connect(f"postgres://cairn@127.0.0.1:{self.pg_port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE cairn")
        self.redis_start()

    def pg_start(self) -> None:
        # synchronous_commit stays on, as in production: with it off, PostgreSQL acknowledges a
        # commit before its WAL is written, and a crash (the postgres scenario) loses creates the
        # API already answered 201 (a first run of this harness lost 3 of 16 that way). fsync=off
        # only risks data on an OS crash, which no scenario causes.
        options = (f"-p {self.pg_port} -k {self.pgdata} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c full_page_writes=off -c max_connections=300")
        subprocess.run(self._as_pg(str(self.pg_bin / "pg_ctl"), "-D", str(self.pgdata), "-w", "-l",
                                   str(self.pgdata / "server.log"), "-o", options, "start"), check=True,
                       capture_output=True)

    def pg_stop(self, mode: str = "immediate") -> None:
        subprocess.run(self._as_pg(str(self.pg_bin / "pg_ctl"), "-D", str(self.pgdata), "-m", mode, "-w", "stop"),
                       capture_output=True)

    def redis_start(self) -> None:
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--logfile", str(self.workdir / "redis.log")])
        wait_for(lambda: subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True)
                 .stdout.strip() == b"PONG", 10, what="redis")

    def redis_kill(self) -> None:
        if self.redis is not None:
            self.redis.send_signal(signal.SIGKILL)
            self.redis.wait(10)

    def stop(self) -> None:
        self.redis_kill()
        self.pg_stop()


# -- the Cairn processes -------------------------------------------------------------------------

class Stack:
    """web, worker, two schedulers, reconciler and outbox relay, each a process of its own."""

    def __init__(self, services: Services, workdir: Path):
        self.services = services
        self.workdir = workdir
        self.data = workdir / "data"
        self.shared = workdir / "shared"  # the pool allows it: replicas write their starts here
        self.starts = self.shared / "starts.log"
        self.web_port = free_port()
        self.url = f"http://127.0.0.1:{self.web_port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.token = ""
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings", "CAIRN_MODE": "server",
            "DATABASE_URL": services.database_url, "REDIS_URL": services.redis_url,
            "CAIRN_DATA_DIR": str(self.data), "CAIRN_PUBLIC_URL": self.url, "PYTHONUNBUFFERED": "1",
            "CAIRN_SCHEDULER_INTERVAL": "0.5", "CAIRN_RECONCILER_INTERVAL": "0.5", "CAIRN_OUTBOX_INTERVAL": "0.5",
            "CAIRN_STOP_GRACE_SECONDS": "2", "DB_CONN_MAX_AGE": "0", "LOG_LEVEL": "WARNING",
        }
        self.env.pop("CAIRN_TASKS_IN_PROCESS", None)

    COMMANDS = {
        "web": ["-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", "{port}",
                "--log-level", "warning"],
        "worker": ["-m", "celery", "-A", "config", "worker", "-Q", "cairn", "--pool", "threads", "--concurrency", "4",
                   "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        "scheduler-1": ["manage.py", "run_scheduler"],
        "scheduler-2": ["manage.py", "run_scheduler"],
        "reconciler": ["manage.py", "run_reconciler", "--backend", "local"],
        "outbox": ["manage.py", "run_outbox"],
    }

    def setup(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        self.shared.mkdir(parents=True, exist_ok=True)
        os.chmod(self.shared, 0o777)
        self.starts.touch()
        os.chmod(self.starts, 0o666)
        subprocess.run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=self.env, check=True)
        seed = f"""
from django.utils import timezone
from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.clusters.models import Node
from apps.clusters.services import local_cluster_register
from apps.projects.services import project_create
from apps.quotas.models import Quota
node = local_cluster_register()
pool = node.pool
pool.allowed_paths = [{str(self.shared)!r}]
pool.save(update_fields=["allowed_paths"])
Node.objects.update_or_create(cluster=node.cluster, name="chaos-gpu", defaults=dict(
    pool=pool, gpu_count=8, gpu_model="chaos", cpu_milli_capacity=64000, cpu_milli_allocatable=64000,
    memory_mb_capacity=256000, memory_mb_allocatable=256000, health="healthy", schedulable=True,
    last_seen_at=timezone.now()))
import secrets
user = User.objects.create_user("chaos", password=secrets.token_urlsafe(16))
project = project_create(slug="chaos", name="Chaos", owner=user)
Quota.objects.create(project=project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=1000000,
                     nominal_memory_mb=100000000, borrowing_limit_gpu_milli=0)
print("TOKEN=" + api_token_create(user=user, name="chaos", never_expires=True)[1])
"""
        seeded = subprocess.run([PYTHON, "manage.py", "shell", "-c", seed], cwd=ROOT, env=self.env,
                                capture_output=True, text=True)
        if seeded.returncode:
            raise RuntimeError(f"seeding failed: {seeded.stderr[-3000:]}")
        out = seeded.stdout
        self.token = next(line[6:] for line in out.splitlines() if line.startswith("TOKEN="))
        for name in self.COMMANDS:
            self.start(name)
        self.wait_web()

    def start(self, name: str) -> None:
        args = [a.replace("{port}", str(self.web_port)) for a in self.COMMANDS[name]]
        log = open(self.workdir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([PYTHON, *args], cwd=ROOT, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        log.close()

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)

    def wait_web(self, timeout: float = 60) -> None:
        def up() -> bool:
            try:
                return requests.get(f"{self.url}/healthz", timeout=2).status_code == 200
            except requests.RequestException:
                return False
        wait_for(up, timeout, 0.2, "the web server")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in psutil.process_iter(["cmdline"]):  # replicas still running
            try:
                if any(str(self.data) in part for part in proc.info["cmdline"] or []):
                    proc.kill()
            except psutil.Error:
                pass

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-chars:]


# -- observing ----------------------------------------------------------------------------------

class Observer:
    def __init__(self, database_url: str):
        self.database_url = database_url
        self.conn: psycopg.Connection | None = None

    def query(self, sql: str, params=()) -> list[tuple]:
        for _ in range(100):  # PostgreSQL may be restarting
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.database_url, autocommit=True, connect_timeout=2)
                with self.conn.cursor() as cur:
                    cur.execute(sql, params)
                    return cur.fetchall()
            except psycopg.OperationalError:
                self.conn = None
                time.sleep(0.2)
        raise RuntimeError("the database did not come back")

    def now(self):
        return self.query("SELECT now()")[0][0]

    def statuses(self, ids) -> dict[int, str]:
        if not ids:
            return {}
        return dict(self.query("SELECT id, status FROM workloads_workload WHERE id = ANY(%s)", (list(ids),)))

    def names(self, prefix: str) -> Counter:
        return Counter(n for (n,) in self.query("SELECT name FROM workloads_workload WHERE name LIKE %s",
                                                (prefix + "%",)))

    def active_gpu_milli(self) -> int:
        return self.query("SELECT COALESCE(SUM(w.gpu_milli * w.replicas), 0) FROM workloads_workload w "
                          "JOIN projects_project p ON p.id = w.project_id WHERE p.slug = 'chaos' AND w.status = ANY(%s)",
                          (list(ACTIVE),))[0][0]

    def first_event_after(self, moment) -> float | None:
        rows = self.query("SELECT min(created_at) FROM workloads_workloadevent WHERE created_at > %s", (moment,))
        return None if rows[0][0] is None else (rows[0][0] - moment).total_seconds()

    def leader_client_port(self) -> int | None:
        rows = self.query("SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                          "WHERE l.locktype = 'advisory' AND l.granted")
        return rows[0][0] if rows else None


# -- clients ------------------------------------------------------------------------------------

@dataclass
class Result:
    scenario: str
    accepted: int = 0
    final: int = 0
    lost: int = 0
    created_twice: int = 0
    launched_twice: int = 0
    quota_exceeded: int = 0
    not_succeeded: int = 0  # final, but failed or lost: these jobs only echo and sleep
    samples: int = 0
    recover_s: float | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return (self.lost == 0 and self.created_twice == 0 and self.launched_twice == 0 and self.quota_exceeded == 0
                and self.not_succeeded == 0)


class Submitter:
    """Clients submitting workloads, each retried with its own Idempotency-Key until accepted."""

    def __init__(self, stack: Stack, prefix: str):
        self.stack, self.prefix = stack, prefix
        self.ids: dict[str, int] = {}  # key -> workload id (every answer for one key must agree)
        self.disagreements = 0
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self.count = 0

    def submit(self, i: int, body: dict, deadline_s: float = 120) -> None:
        key = uuid.uuid4().hex
        body = {**body, "name": f"{self.prefix}-{i}"}
        url = f"{self.stack.url}/api/v1/projects/chaos/training-jobs/"
        headers = {"Authorization": f"Bearer {self.stack.token}", "Idempotency-Key": key}
        deadline = time.monotonic() + deadline_s
        last = ""
        while time.monotonic() < deadline:
            try:
                answer = requests.post(url, json=body, headers=headers, timeout=10)
            except requests.RequestException as exc:
                last = type(exc).__name__
                time.sleep(0.25)
                continue
            if answer.status_code in (200, 201):
                with self.lock:
                    wid = answer.json()["id"]
                    if key in self.ids and self.ids[key] != wid:
                        self.disagreements += 1
                    self.ids[key] = wid
                return
            last = f"{answer.status_code} {answer.text[:200]}"
            if answer.status_code < 500 and answer.status_code not in (409, 429):
                break  # refused for good: not accepted
            time.sleep(0.25)
        with self.lock:
            self.failures.append(f"{body['name']}: {last}")

    def run(self, n: int, clients: int, body_for, on_progress=None) -> None:
        first, self.count = self.count, self.count + n  # names stay unique over several runs
        with ThreadPoolExecutor(clients) as pool:
            futures = [pool.submit(self.submit, first + i, body_for(i)) for i in range(n)]
            for done, future in enumerate(futures, 1):
                future.result()
                if on_progress:
                    on_progress(done)


def job(stack: Stack, *, sleep: float = 0.2, gpu: float = 0, replicas: int = 1, fail_first: bool = False) -> dict:
    """A job whose replicas record their start (workload, attempt, replica) and sleep. With
    `fail_first`, replica 0 of attempt 1 fails at once, so the gang restarts (attempt 2) once."""
    fail = 'if [ "$CAIRN_ATTEMPT" = 1 ] && [ "$CAIRN_REPLICA" = 0 ]; then exit 3; fi; ' if fail_first else ""
    command = f'echo "$CAIRN_WORKLOAD_ID $CAIRN_ATTEMPT $CAIRN_REPLICA" >> {stack.starts}; {fail}sleep {sleep}'
    return {"command": command, "replicas": replicas, "max_restarts": 1 if fail_first else 0,
            "resources": {"gpu": gpu, "cpu": 0.05, "memory": "32Mi"}, "priority": "P3"}


def _wait_final(observer: Observer, ids: set[int], stall_s: float) -> str | None:
    """Wait until every workload of `ids` is final, as long as some of them keep finishing: a
    loaded machine is slow, not lossy. Gives up (returns why) after `stall_s` seconds in which
    none finished."""
    finished, last_change = -1, time.monotonic()
    while True:
        statuses = observer.statuses(ids)
        final = sum(1 for s in statuses.values() if s in FINAL)
        if final == len(ids) and len(statuses) == len(ids):
            return None
        if final != finished:
            finished, last_change = final, time.monotonic()
        elif time.monotonic() - last_change > stall_s:
            return f"{len(ids) - final} accepted workload(s) not final, none finished in the last {stall_s:g}s"
        time.sleep(0.5)


def settle(result: Result, stack: Stack, observer: Observer, submitter: Submitter, *, timeout: float,
           fault_end=None) -> Result:
    """Wait for every accepted workload to reach a final state (`timeout`: how long none may
    finish before the rest count as lost), then count."""
    ids = set(submitter.ids.values())
    stalled = _wait_final(observer, ids, timeout)
    if stalled:
        result.notes.append(stalled)
    statuses = observer.statuses(ids)
    if len(statuses) < len(ids):
        result.notes.append(f"{len(ids) - len(statuses)} accepted workload(s) are not in the database")
    result.accepted = len(ids)
    result.final = sum(1 for s in statuses.values() if s in FINAL)
    result.lost = len(ids) - result.final
    names = observer.names(submitter.prefix + "-")
    result.created_twice = sum(c - 1 for c in names.values() if c > 1) + submitter.disagreements
    starts = Counter(tuple(line.split()) for line in stack.starts.read_text().splitlines() if line.strip())
    mine = {str(i) for i in ids}
    result.launched_twice = sum(c - 1 for k, c in starts.items() if k and k[0] in mine and c > 1)
    if fault_end is not None and result.recover_s is None:
        result.recover_s = observer.first_event_after(fault_end)
    if submitter.failures:
        result.notes.append(f"{len(submitter.failures)} submission(s) never accepted, e.g. {submitter.failures[0]}")
    result.not_succeeded = sum(1 for s in statuses.values() if s != "succeeded")
    if result.not_succeeded:
        ended = Counter(s for s in statuses.values() if s != "succeeded")
        result.notes.append(f"{result.not_succeeded} accepted workload(s) ended other than succeeded: {dict(ended)}")
    return result


# -- scenarios ----------------------------------------------------------------------------------

def _submit_with_fault_at_half(stack: Stack, observer: Observer, submitter: Submitter, *, n: int, clients: int,
                               fault) -> object:
    """Submit n jobs from `clients` clients; once half are accepted, `fault()` runs beside the
    submissions (it returns when the fault is over). Returns when it ended, on the database's clock."""
    started, ended = threading.Event(), {}

    def run_fault() -> None:
        fault()
        ended["at"] = observer.now()

    thread = threading.Thread(target=run_fault)

    def progress(done: int) -> None:
        if done >= n // 2 and not started.is_set():
            started.set()
            thread.start()

    submitter.run(n, clients, lambda i: job(stack), progress)
    thread.join()
    return ended["at"]


def scenario_redis(stack: Stack, observer: Observer, *, n: int, clients: int, down_s: float) -> Result:
    result, submitter = Result("redis"), Submitter(stack, "redis")

    def fault() -> None:
        stack.services.redis_kill()
        time.sleep(down_s)
        stack.services.redis_start()

    fault_end = _submit_with_fault_at_half(stack, observer, submitter, n=n, clients=clients, fault=fault)
    result.notes.append(f"Redis SIGKILLed after {n // 2} accepted, restarted {down_s:g}s later")
    return settle(result, stack, observer, submitter, timeout=120, fault_end=fault_end)


def _kill_mid_launch(stack: Stack, observer: Observer, submitter: Submitter, *, process: str, kills: int,
                     gangs: int, replicas: int, attempt: int, fail_first: bool = False) -> tuple[int, object]:
    """`kills` times: submit `gangs` gangs, SIGKILL `process` as soon as one of them has attempt
    `attempt` half launched (some replica records written, not all), start it again. Returns how
    many kills caught a gang half launched, and when the last restart happened."""
    caught, fault_end = 0, None
    for _ in range(kills):
        before = set(submitter.ids.values())
        submitter.run(gangs, min(gangs, 4), lambda i: job(stack, sleep=1, replicas=replicas, fail_first=fail_first))
        new = set(submitter.ids.values()) - before

        def half_launched(new=new):
            for wid in new:
                records = list((stack.data / "workloads" / str(wid) / f"attempt-{attempt}").glob("replica-*.json"))
                if 0 < len(records) < replicas:
                    return True
            return False

        try:
            wait_for(half_launched, 60, 0.002, "a gang half launched")
            caught += 1
        except TimeoutError:
            pass
        stack.kill(process)
        time.sleep(0.5)
        stack.start(process)
        fault_end = observer.now()
    return caught, fault_end


def scenario_worker(stack: Stack, observer: Observer, *, kills: int, gangs: int, replicas: int = 4) -> Result:
    result, submitter = Result("worker"), Submitter(stack, "worker")
    caught, fault_end = _kill_mid_launch(stack, observer, submitter, process="worker", kills=kills, gangs=gangs,
                                         replicas=replicas, attempt=1)
    result.notes.append(f"worker SIGKILLed {kills} times, {caught} of them with a gang half launched")
    return settle(result, stack, observer, submitter, timeout=120, fault_end=fault_end)


def scenario_reconciler(stack: Stack, observer: Observer, *, kills: int, gangs: int, replicas: int = 4) -> Result:
    """Gangs whose first attempt fails (replica 0 exits 3) restart once in place; the reconciler,
    which launches restarts, is SIGKILLed while attempt 2 of a gang is half launched."""
    result, submitter = Result("reconciler"), Submitter(stack, "reconciler")
    caught, fault_end = _kill_mid_launch(stack, observer, submitter, process="reconciler", kills=kills, gangs=gangs,
                                         replicas=replicas, attempt=2, fail_first=True)
    result.notes.append(f"reconciler SIGKILLed {kills} times, {caught} of them with a gang's restart half launched")
    return settle(result, stack, observer, submitter, timeout=120, fault_end=fault_end)


def _process_with_local_port(port: int, candidates: dict[str, subprocess.Popen]) -> str | None:
    for name, proc in candidates.items():
        try:
            if any(c.laddr and c.laddr.port == port for c in psutil.Process(proc.pid).net_connections("tcp")):
                return name
        except psutil.Error:
            continue
    return None


def scenario_scheduler(stack: Stack, observer: Observer, *, n: int) -> Result:
    result, submitter = Result("scheduler"), Submitter(stack, "scheduler")
    submitter.run(n, 4, lambda i: job(stack))
    schedulers = {k: v for k, v in stack.procs.items() if k.startswith("scheduler")}
    leader, deadline = None, time.monotonic() + 10
    while leader is None and time.monotonic() < deadline:  # the lock is held for one cycle at a time
        port = observer.leader_client_port()
        if port:
            leader = _process_with_local_port(port, schedulers)
        time.sleep(0.001)
    caught = leader is not None
    leader = leader or "scheduler-1"
    stack.kill(leader)
    t0 = time.monotonic()
    marker = Submitter(stack, "scheduler-after")
    marker.submit(0, job(stack))
    [wid] = marker.ids.values()
    try:
        wait_for(lambda: observer.statuses([wid]).get(wid) not in ("queued", None), 30, 0.02, "the standby to admit")
        result.recover_s = round(time.monotonic() - t0, 3)
    except TimeoutError as exc:
        result.notes.append(str(exc))
    result.notes.append(f"{leader} SIGKILLed {'while holding the leader lock' if caught else '(lock not caught)'}; "
                        "recover_s: from the kill to the admission of a job submitted then")
    submitter.ids.update({f"marker-{k}": v for k, v in marker.ids.items()})
    stack.start(leader)
    return settle(result, stack, observer, submitter, timeout=120)


def scenario_postgres(stack: Stack, observer: Observer, *, n: int, clients: int, down_s: float) -> Result:
    result, submitter = Result("postgres"), Submitter(stack, "postgres")

    def fault() -> None:
        stack.services.pg_stop("immediate")
        time.sleep(down_s)
        stack.services.pg_start()

    fault_end = _submit_with_fault_at_half(stack, observer, submitter, n=n, clients=clients, fault=fault)
    result.notes.append(f"PostgreSQL stopped (immediate) after {n // 2} accepted, started {down_s:g}s later")
    return settle(result, stack, observer, submitter, timeout=120, fault_end=fault_end)


def scenario_web(stack: Stack, observer: Observer, *, n: int, clients: int) -> Result:
    result, submitter = Result("web"), Submitter(stack, "web")

    def fault() -> None:
        stack.kill("web")
        stack.start("web")
        stack.wait_web()

    fault_end = _submit_with_fault_at_half(stack, observer, submitter, n=n, clients=clients, fault=fault)
    result.notes.append(f"web SIGKILLed after {n // 2} accepted and restarted; clients retried with their keys")
    return settle(result, stack, observer, submitter, timeout=120, fault_end=fault_end)


def scenario_quota(stack: Stack, observer: Observer, *, n: int, quota_milli: int = 8000) -> Result:
    result, submitter = Result("quota"), Submitter(stack, "quota")
    stop = threading.Event()
    samples: list[int] = []
    thread = threading.Thread(target=_sample, args=(Observer(observer.database_url), samples, stop))
    thread.start()
    submitter.run(n, n, lambda i: job(stack, sleep=1, gpu=1 if i % 3 else 2))
    settle(result, stack, observer, submitter, timeout=120)
    stop.set()
    thread.join()
    result.samples = len(samples)
    result.quota_exceeded = sum(1 for s in samples if s > quota_milli)
    result.notes.append(f"{len(samples)} samples of the project's admitted GPUs every 100 ms; peak "
                        f"{max(samples, default=0) / 1000:g} of {quota_milli / 1000:g}")
    return result


def _sample(observer: Observer, samples: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        samples.append(observer.active_gpu_milli())
        stop.wait(0.1)


FULL = {
    "redis": {"n": 1000, "clients": 8, "down_s": 10},
    "worker": {"kills": 3, "gangs": 4},
    "reconciler": {"kills": 3, "gangs": 4},
    "scheduler": {"n": 20},
    "postgres": {"n": 200, "clients": 8, "down_s": 5},
    "web": {"n": 200, "clients": 8},
    "quota": {"n": 50},
}
REDUCED = {
    "redis": {"n": 24, "clients": 4, "down_s": 2},
    "worker": {"kills": 1, "gangs": 1},
    "reconciler": {"kills": 1, "gangs": 1},
    "scheduler": {"n": 2},
    "postgres": {"n": 16, "clients": 4, "down_s": 1},
    "web": {"n": 16, "clients": 4},
    "quota": {"n": 12},
}
SCENARIOS = {"redis": scenario_redis, "worker": scenario_worker, "reconciler": scenario_reconciler,
             "scheduler": scenario_scheduler,
             "postgres": scenario_postgres, "web": scenario_web, "quota": scenario_quota}


class Chaos:
    """Services + stack + observer, started once for several scenarios."""

    def __init__(self, workdir: Path | None = None, *, keep: bool = False):
        self.keep = keep  # keep the work directory (logs, the database) afterwards
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="cairn-chaos-"))
        self.services = Services(self.workdir)
        self.stack = Stack(self.services, self.workdir)
        self.observer: Observer | None = None

    def __enter__(self) -> Chaos:
        try:
            self.services.start()
            self.observer = Observer(self.services.database_url)
            self.stack.setup()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def run(self, name: str, **params) -> Result:
        started = time.monotonic()
        result = SCENARIOS[name](self.stack, self.observer, **params)
        result.seconds = round(time.monotonic() - started, 1)
        if result.recover_s is not None:
            result.recover_s = round(result.recover_s, 3)
        return result

    def __exit__(self, *exc) -> None:
        self.stack.stop()
        self.services.stop()
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def table(results: list[Result]) -> str:
    lines = ["| scenario | accepted | final | not succeeded | lost | created twice | launched twice | quota exceeded "
             "| recover (s) | wall (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        quota = f"{r.quota_exceeded} of {r.samples}" if r.samples else "-"
        recover = "-" if r.recover_s is None else f"{r.recover_s:g}"
        lines.append(f"| {r.scenario} | {r.accepted} | {r.final} | {r.not_succeeded} | {r.lost} | {r.created_twice} "
                     f"| {r.launched_twice} "
                     f"| {quota} | {recover} | {r.seconds:g} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true", help="the small versions the test suite runs")
    parser.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="run only these scenarios")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) afterwards")
    args = parser.parse_args(argv)
    sizes = REDUCED if args.reduced else FULL
    results = []
    with Chaos(keep=args.keep) as chaos:
        print(f"chaos: work directory {chaos.workdir}", flush=True)
        for name in args.only or list(SCENARIOS):
            result = chaos.run(name, **sizes[name])
            print(table([result]).splitlines()[-1], "  ", "; ".join(result.notes), flush=True)
            results.append(result)
    print()
    print(table(results))
    for r in results:
        for note in r.notes:
            print(f"- {r.scenario}: {note}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
    return 0 if all(r.ok() for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
