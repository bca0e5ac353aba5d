"""Fault injection: how fast Cairn detects a crashed, hung or straggling rank of a real DDP job and
resumes it, and how much work is lost with checkpoints every N steps against none.

Runs examples/ddp_train.py (2 ranks, PyTorch DDP on gloo/CPU) on the local backend with a real
Cairn server process (the SDK reports progress and checkpoints to it) and Cairn's reconciler and
scheduler called in a loop in this process, on a private PostgreSQL:

    scripts/with-test-services.sh .venv/bin/python bench/fault_injection.py [--no-write]

Faults: crash = SIGKILL of rank 1 at step 40; hang = SIGSTOP of rank 1 at step 40 (hang_timeout
10 s); straggler = rank 1 placed on a node that sleeps 0.25 s more per step (policy evict: the node
is cordoned SlowNode and the job resumes on another). Figures per run: time to detect (fault to
Cairn's event), time to resume (fault to the next attempt's first step), steps redone, and the
goodput accounting (work lost since the last checkpoint + restart overhead), as replica-seconds:
on a job with G GPUs per replica, GPU-seconds lost are G times these.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

STEPS, FAULT_STEP, STEP_SECONDS, HANG_TIMEOUT = 120, 40, 0.05, 10


def database_url() -> str:
    base = os.environ.get("DATABASE_URL")
    if not base or not base.startswith("postgres"):
        sys.exit("DATABASE_URL must point at PostgreSQL: run under scripts/with-test-services.sh")
    import psycopg

    parts = urllib.parse.urlsplit(base)
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS cairn_faults WITH (FORCE)")
        conn.execute("CREATE DATABASE cairn_faults")
    return parts._replace(path="/cairn_faults").geturl()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db_url: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except requests.RequestException:
            time.sleep(0.3)
    raise RuntimeError("the Cairn server did not come up")


def setup(db_url: str, data_dir: Path, url: str):
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    settings.CAIRN_DATA_DIR = data_dir
    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": url, "STOP_GRACE_SECONDS": 1.0, "RESTART_BACKOFF_SECONDS": 0.5}
    from apps.clusters.models import Cluster, Node, ResourcePool
    from apps.projects.models import Project
    from apps.quotas.models import Quota

    cluster, _ = Cluster.objects.get_or_create(name="local", defaults={"backend": "local"})
    pool, _ = ResourcePool.objects.get_or_create(cluster=cluster, name="local")
    pool.allowed_paths = [str(ROOT / "examples")]
    pool.save()
    for name in ("node-a", "node-b", "node-c"):
        Node.objects.get_or_create(cluster=cluster, name=name, defaults={
            "pool": pool, "cpu_milli_capacity": 1000, "cpu_milli_allocatable": 1000, "memory_mb_capacity": 4096,
            "memory_mb_allocatable": 4096, "health": "healthy", "schedulable": True})
    project, _ = Project.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    Quota.objects.get_or_create(project=project, pool=pool, defaults={
        "nominal_gpu_milli": 0, "nominal_cpu_milli": 16000, "nominal_memory_mb": 65536})
    return project, pool


def run_scenario(project, pool, fault: str, every: int) -> dict:
    from django.utils import timezone

    from apps.backends.local.reconciler import reconcile_once
    from apps.backends.local.stacks import command_process
    from apps.backends.services import workload_dispatch
    from apps.clusters.models import Node
    from apps.scheduling.services import scheduling_cycle
    from apps.training.models import AttemptProgress, ReplicaProgress
    from apps.training.selectors import workload_goodput
    from apps.workloads.models import Workload

    Node.objects.filter(pool=pool).update(schedulable=True, cordon_reason="", health="healthy")
    env = {"STEPS": str(STEPS), "STEP_SECONDS": str(STEP_SECONDS), "CHECKPOINT_EVERY": str(every)}
    spec = {"command": ["python", str(ROOT / "examples" / "ddp_train.py")], "env": env, "hang_timeout_seconds": HANG_TIMEOUT}
    if fault == "straggler":
        env.update(SLOW_NODE="node-b", SLOW_SECONDS="0.25")
        spec["straggler_policy"] = "evict"
    workload = Workload.objects.create(
        project=project, pool=pool, kind="training", name=f"{fault}-{every}-{time.time_ns()}", spec=spec,
        replicas=2, cpu_milli=1000, memory_mb=2048, max_restarts=2, status="admitted", admitted_at=timezone.now(),
        placement=[{"replica": 0, "node": "node-a"}, {"replica": 1, "node": "node-b"}])
    workload_dispatch(workload_id=workload.pk)
    fault_at = None
    stopped = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        reconcile_once()
        workload.refresh_from_db()
        if workload.status == "queued":
            scheduling_cycle()
        elif workload.status == "admitted":
            workload_dispatch(workload_id=workload.pk)
        if workload.status in ("succeeded", "failed", "lost", "stopped"):
            break
        if fault_at is None and workload.attempt == 1:
            if fault == "straggler":
                fault_at = workload.started_at.timestamp()
            else:
                row = ReplicaProgress.objects.filter(workload=workload, replica=1, attempt=1).first()
                if row is not None and row.step >= FAULT_STEP:
                    record = next(r for r in workload.runtime["replicas"] if r["replica"] == 1)
                    proc = command_process(record["pid"], record["create_time"])
                    if proc is not None:
                        stopped = proc.pid
                        os.kill(proc.pid, signal.SIGKILL if fault == "crash" else signal.SIGSTOP)
                        fault_at = time.time()
        time.sleep(0.1)
    if stopped and fault == "hang":
        try:
            os.kill(stopped, signal.SIGKILL)
        except ProcessLookupError:
            pass
    reason = {"crash": "Restarting", "hang": "Hung", "straggler": "Straggler"}[fault]
    detected = workload.events.filter(reason=reason).order_by("created_at").first()
    resumed = AttemptProgress.objects.filter(workload=workload, attempt=2).first()
    result = workload_goodput(workload)
    redone = None
    if resumed is not None:
        last_step_attempt1 = _last_loss_step(workload, 1)
        redone = max(last_step_attempt1 - resumed.first_step + 1, 0) if last_step_attempt1 is not None else None
    trail = list(workload.events.exclude(reason="CheckpointSaved").values_list("reason", "message"))
    return {
        "events": [f"{reason}: {message[:160]}" for reason, message in trail],
        "fault": fault, "every": every, "status": workload.status, "attempts": workload.attempt,
        "detect": detected.created_at.timestamp() - fault_at if detected and fault_at else None,
        "resume": resumed.first_step_at.timestamp() - fault_at if resumed and fault_at else None,
        "resumed_at_step": resumed.first_step if resumed else None, "redone": redone,
        "lost": result.lost_seconds * workload.replicas, "hung": result.hung_seconds * workload.replicas,
        "overhead": result.overhead_seconds * workload.replicas,
        "goodput": result.ratio,
    }


def _last_loss_step(workload, attempt: int) -> int | None:
    from apps.tracking.models import MetricSummary

    summary = MetricSummary.objects.filter(run__workload=workload, run__attempt=attempt, key="loss").first()
    return summary.last_step if summary else None


def fmt(value, unit="s") -> str:
    return "-" if value is None else (f"{value:.2f}" if unit == "" else f"{value:.1f}{unit}")


def _kill_replicas(work: Path) -> None:
    """Replicas this run started and left behind: their shims name this run's data folder."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(work) in part for part in proc.info["cmdline"] or []):
                os.killpg(proc.pid, signal.SIGKILL) if os.getpgid(proc.pid) == proc.pid else proc.kill()
        except (psutil.Error, OSError):
            continue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--faults", nargs="+", default=["crash", "hang", "straggler"])
    parser.add_argument("--every", type=int, nargs="+", default=[10, 0], help="checkpoint every N steps (0: none)")
    args = parser.parse_args()
    db_url = database_url()
    work = Path(tempfile.mkdtemp(prefix="cairn-faults-"))
    (work / "data").mkdir()
    server, url = start_server(db_url, work / "server.log")
    rows = []
    try:
        project, pool = setup(db_url, work / "data", url)
        for fault in args.faults:
            for every in args.every:
                result = run_scenario(project, pool, fault, every)
                print(result, flush=True)
                rows.append(result)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        _kill_replicas(work)
    table = ["| fault | checkpoints | end | attempts | detected after | resumed after | resumed at step | "
             "steps redone | work lost | restart overhead | goodput |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hung = f" (hung {fmt(r['hung'], ' replica-s')})" if r["hung"] else ""
        table.append(
            f"| {r['fault']} | {'every ' + str(r['every']) + ' steps' if r['every'] else 'none'} | {r['status']} | "
            f"{r['attempts']} | {fmt(r['detect'])} | {fmt(r['resume'])} | {r['resumed_at_step']} | {r['redone']} | "
            f"{fmt(r['lost'], ' replica-s')}{hung} | {fmt(r['overhead'], ' replica-s')} | "
            f"{fmt(r['goodput'], '')} |")
    body = "\n".join([
        f"examples/ddp_train.py, 2 ranks, {STEPS} steps of ~{STEP_SECONDS}s, fault at step {FAULT_STEP} "
        f"(straggler: from the start, policy evict); hang_timeout {HANG_TIMEOUT} s, stop grace 1 s, restart backoff 0.5 s. "
        "Times are from the fault (straggler: from the start of the job) to Cairn's event and to the next "
        "attempt's first reported step; work lost (of it hung: from when the rank got stuck to the restart) and "
        "overhead are the goodput accounting (apps/training/health.py).",
        "", *table])
    print(body)
    if not args.no_write:
        from benchmarks_doc import write_block

        write_block(section="## Training resilience", prefix="resilience", key="faults",
                    intro="Hang and straggler detection, gang restarts from checkpoints (docs/training.md).",
                    block_body="### b. Fault injection: detect, resume, work lost\n\n"
                               "`scripts/with-test-services.sh .venv/bin/python bench/fault_injection.py`\n\n" + body)


if __name__ == "__main__":
    main()
