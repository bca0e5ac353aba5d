#!/usr/bin/env python3
"""Screenshots of the dashboard for the docs (docs/screenshots/*.png, 1366x768).

    .venv/bin/python scripts/screenshots.py                 # a throw-away Cairn with a seeded demo
    .venv/bin/python scripts/screenshots.py --url http://127.0.0.1:8000 --username admin \\
        --password '...' --project demo                      # an existing Cairn (API-made demo data only)

Without --url it starts Cairn like the browser tests do: `manage.py run_embedded` on a free port,
on a private PostgreSQL and Redis (it re-runs itself under scripts/with-test-services.sh unless
DATABASE_URL is set), then seeds a demo: two projects, a quota on this machine's pool and one on a
GPU pool of a (never contacted) Kubernetes cluster with synthetic DCGM-like telemetry (this machine
has no GPU), a hyper-parameter sweep logged with the SDK, a job running examples/train.py with live
loss curves, a finished and a failed job, and work waiting in the queues. The browser is Debian's
chromium (`make chromium`), driven by Playwright.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1366, "height": 768}
PASSWORD = "cairn-demo-password"
PROJECT = "vision"

# One run of a sweep, logged as a researcher would from a laptop.
SWEEP_RUN = textwrap.dedent("""
    import math, random, sys
    import cairn
    url, token, project, name, lr, batch, warmup = sys.argv[1:8]
    lr, batch, warmup = float(lr), int(batch), int(warmup)
    rng = random.Random(name)
    cairn.init(url=url, project=project, token=token, name=name, system_metrics=False)
    cairn.log_params({"lr": lr, "batch_size": batch, "warmup_steps": warmup, "optimizer": "adamw",
                      "model": "resnet50", "dataset": "imagenet-1k"})
    floor = 0.35 + abs(math.log10(lr) + 3.2) * 0.25
    for step in range(400):
        ramp = min(1.0, (step + 1) / max(warmup, 1))
        loss = floor + 6.5 * math.exp(-step * lr * 9 * ramp) + rng.gauss(0, 0.04)
        cairn.log({"train/loss": loss, "lr": lr * ramp}, step=step)
        if step % 20 == 19:
            cairn.log({"val/accuracy": max(0.0, 0.92 - floor * 0.4 - 0.5 * math.exp(-step * lr * 6))}, step=step)
    sys.exit(0 if cairn.finish() else 1)
""")

SWEEP = [("resnet50-lr-3e-4", "0.0003", "256", "20"), ("resnet50-lr-1e-3", "0.001", "256", "20"),
         ("resnet50-lr-3e-3", "0.003", "512", "40")]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots", help="where the PNGs go")
    parser.add_argument("--url", help="an existing Cairn to photograph instead of a throw-away one")
    parser.add_argument("--username", default="ada")
    parser.add_argument("--password", default=PASSWORD)
    parser.add_argument("--project", default=PROJECT)
    return parser.parse_args()


def log(message: str) -> None:
    print(f"screenshots: {message}", flush=True)


# ---------------------------------------------------------------- the throw-away Cairn

def create_database() -> None:
    """A fresh database named cairn_screenshots on the PostgreSQL of DATABASE_URL."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(os.environ["DATABASE_URL"])
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute("DROP DATABASE IF EXISTS cairn_screenshots WITH (FORCE)")
        connection.execute("CREATE DATABASE cairn_screenshots")
    os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path="/cairn_screenshots"))


def setup_django(data_dir: Path) -> None:
    create_database()
    os.environ.update({"DJANGO_SETTINGS_MODULE": "config.settings", "CAIRN_MODE": "embedded",
                       "CAIRN_DATA_DIR": str(data_dir)})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def seed_rows() -> dict:
    """Users, projects, pools, nodes and quotas: what an administrator sets up in the admin."""
    from django.db import transaction

    from apps.accounts.models import User
    from apps.clusters.models import Cluster, Node, ResourcePool
    from apps.clusters.services import local_cluster_register
    from apps.projects.models import Membership, Project
    from apps.quotas.models import Quota

    local = local_cluster_register()
    # The demo's jobs run examples/train.py from this checkout: a sandboxed replica sees only the
    # pool's allowed paths (as `seed_demo` does for `make run`).
    if str(ROOT) not in local.pool.allowed_paths:
        local.pool.allowed_paths = [*local.pool.allowed_paths, str(ROOT)]
        local.pool.save(update_fields=["allowed_paths"])
    with transaction.atomic():
        ada = User.objects.create_user("ada", "ada@example.org", PASSWORD, is_staff=True)
        ben = User.objects.create_user("ben", "ben@example.org", PASSWORD)
        vision = Project.objects.create(slug=PROJECT, name="Vision")
        language = Project.objects.create(slug="language", name="Language models")
        Membership.objects.create(project=vision, user=ada, role="owner")
        Membership.objects.create(project=vision, user=ben, role="member")
        Membership.objects.create(project=language, user=ada, role="maintainer")
        Membership.objects.create(project=language, user=ben, role="owner")

        gpu_cluster = Cluster.objects.create(name="gpu-east", backend="kubernetes",
                                             config={"note": "demo rows: never contacted"})
        a100 = ResourcePool.objects.create(cluster=gpu_cluster, name="a100", description="8x A100 80GB nodes",
                                           accelerator_models=["NVIDIA A100-SXM4-80GB"])
        nodes = []
        for n in range(4):
            nodes.append(Node.objects.create(
                cluster=gpu_cluster, pool=a100, name=f"a100-{n + 1:02d}", cpu_milli_capacity=128000,
                cpu_milli_allocatable=120000, memory_mb_capacity=1024 * 1024, memory_mb_allocatable=1000 * 1024,
                gpu_count=8, gpu_model="NVIDIA A100-SXM4-80GB", gpu_memory_mb=81920, health="healthy",
                schedulable=n != 3, topology_domain=f"rack-{n // 2 + 1}"))
        Quota.objects.create(project=vision, pool=local.pool, nominal_cpu_milli=local.cpu_milli_allocatable,
                             nominal_memory_mb=local.memory_mb_allocatable)
        Quota.objects.create(project=vision, pool=a100, nominal_gpu_milli=8000, nominal_cpu_milli=96000,
                             nominal_memory_mb=512 * 1024, borrowing_limit_gpu_milli=0, gpu_hour_budget=2000)
        Quota.objects.create(project=language, pool=a100, nominal_gpu_milli=16000, nominal_cpu_milli=192000,
                             nominal_memory_mb=1024 * 1024, borrowing_limit_gpu_milli=8000, gpu_hour_budget=6000)
    # Work already running on the GPU pool, placed as the scheduler and the Kubernetes backend
    # would have (the demo cluster is never contacted, so nothing moves them on).
    placed = [
        (language, ben, "llama-pretrain-8b", 2, 8, [{"replica": 0, "node": "a100-01", "gpus": list(range(8))},
                                                   {"replica": 1, "node": "a100-02", "gpus": list(range(8))}]),
        (vision, ada, "detr-coco-train", 1, 4, [{"replica": 0, "node": "a100-03", "gpus": [0, 1, 2, 3]}]),
    ]
    for project, user, name, replicas, gpus, placement in placed:
        start_running(project=project, user=user, name=name, pool=a100, replicas=replicas, gpus=gpus,
                      placement=placement)
    return {"local": local, "gpu_nodes": [n.name for n in nodes]}


def start_running(*, project, user, name, pool, replicas, gpus, placement) -> None:
    from django.utils import timezone

    from apps.workloads.services import workload_submit, workload_transition

    workload = workload_submit(
        project=project, kind="training", name=name, pool=pool, created_by=user, priority=3, preemptible=True,
        spec={"command": ["torchrun", "--nproc_per_node", str(gpus), "train.py"], "env": {}}, replicas=replicas,
        gpu_milli=gpus * 1000, cpu_milli=gpus * 8000, memory_mb=gpus * 64 * 1024, gpu_model="NVIDIA A100-SXM4-80GB")
    nodes = ", ".join(sorted({p["node"] for p in placement}))
    workload_transition(workload_id=workload.pk, from_statuses={"queued"}, to_status="admitted", reason="Admitted",
                        message=f"Placed on {nodes}.", placement=placement, admitted_at=timezone.now())
    workload_transition(workload_id=workload.pk, from_statuses={"admitted"}, to_status="running", reason="Started",
                        message=f"Started {replicas} replica(s), attempt 1.", attempt=1, started_at=timezone.now(),
                        runtime={"backend": "kubernetes", "attempt": 1, "replicas": [], "alive": True})


def record_gpu_telemetry(nodes: list[str]) -> None:
    """DCGM-like samples for the demo GPU nodes, as the telemetry loop would store them."""
    from django.utils import timezone

    from apps.telemetry.models import TelemetrySample
    from apps.telemetry.services import telemetry_record

    rng = random.Random(7)
    now = timezone.now()
    samples = []
    for n, node in enumerate(nodes):
        samples.append(TelemetrySample(time=now, node=node, metric="node.cpu_percent", value=rng.uniform(20, 70)))
        for gpu in range(8):
            busy = n < 2 or (n == 2 and gpu < 4)
            util = rng.uniform(78, 99) if busy else rng.uniform(0, 6)
            used = rng.uniform(52000, 78000) if busy else rng.uniform(400, 900)
            for metric, value in (("gpu.util_percent", util), ("gpu.memory_used_mb", used),
                                  ("gpu.memory_free_mb", 81920 - used),
                                  ("gpu.temperature_c", 38 + util * 0.35 + rng.uniform(-2, 2)),
                                  ("gpu.power_w", 70 + util * 3.1)):
                samples.append(TelemetrySample(time=now, node=node, gpu=gpu, metric=metric, value=value))
    telemetry_record(samples=samples)


def _closing_connections(work, *args) -> None:
    from django.db import connections

    try:
        work(*args)
    finally:
        connections.close_all()


def start_server(data_dir: Path, log_path: Path):
    from tests.processes import EmbeddedServer

    env = dict(os.environ)
    env.update({"CAIRN_MODE": "embedded", "CAIRN_DATA_DIR": str(data_dir), "CAIRN_TASKS_IN_PROCESS": "1",
                "CAIRN_SCHEDULER_INTERVAL": "0.5", "CAIRN_RECONCILER_INTERVAL": "0.5", "PYTHONUNBUFFERED": "1"})
    return EmbeddedServer(env, log=log_path)


# ---------------------------------------------------------------- demo data through the API

class Api:
    def __init__(self, url: str, username: str, password: str, project: str):
        self.url, self.project = url.rstrip("/"), project
        answer = requests.post(f"{self.url}/api/v1/auth/login/", json={"username": username, "password": password},
                               timeout=30)
        answer.raise_for_status()
        self.token = answer.json()["token"]
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {self.token}"

    def project_url(self, path: str) -> str:
        return f"{self.url}/api/v1/projects/{self.project}/{path}"

    def submit(self, **body) -> dict:
        answer = self.http.post(self.project_url("training-jobs/"), json=body, timeout=30)
        if answer.status_code != 201:
            raise SystemExit(f"submitting {body.get('name')} failed: {answer.status_code} {answer.text}")
        return answer.json()

    def workload(self, workload_id: int) -> dict:
        return self.http.get(self.project_url(f"training-jobs/{workload_id}/"), timeout=30).json()

    def wait_status(self, workload_id: int, statuses: tuple[str, ...], timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            workload = self.workload(workload_id)
            if workload["status"] in statuses:
                return workload
            time.sleep(0.5)
        raise SystemExit(f"workload {workload_id} did not reach {statuses}: {workload['status']}")

    def runs(self) -> list[dict]:
        answer = self.http.get(self.project_url("runs/"), params={"page_size": 200}, timeout=30).json()
        return answer["results"] if isinstance(answer, dict) else answer


def seed_through_api(api: Api, *, with_gpu_pool: bool, pool: str | None = None, suffix: str = "") -> dict:
    """Runs and jobs made through the API; `suffix` keeps the names unique on a shared Cairn."""
    log("logging a sweep of three runs with the SDK")
    sweep_runs = [(name + suffix, *rest) for name, *rest in SWEEP]
    sweep = [subprocess.Popen([sys.executable, "-c", SWEEP_RUN, api.url, api.token, api.project, *run],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT) for run in sweep_runs]
    example = str(ROOT / "examples" / "train.py")
    where = {"pool": pool} if pool else {}
    done = api.submit(name="resnet50-baseline" + suffix, **where, command=["python", example], replicas=1,
                      env={"STEPS": "60", "STEP_SECONDS": "0.02", "LR": "0.02"},
                      resources={"cpu": 0.5, "memory": "512Mi"})
    failed = api.submit(name="vit-augment-test" + suffix, **where, command="python -c \"import sys; print('loading conf/augment.yaml');"
                        " sys.exit('config not found: conf/augment.yaml')\"",
                        resources={"cpu": 0.25, "memory": "256Mi"})
    api.wait_status(done["id"], ("succeeded", "failed"))
    api.wait_status(failed["id"], ("succeeded", "failed"))
    running = api.submit(name="resnet50-finetune" + suffix, **where, command=["python", example], replicas=2, priority="P2",
                         env={"STEPS": "5000", "STEP_SECONDS": "0.25", "LR": "0.01"}, max_runtime_seconds=4 * 3600,
                         resources={"cpu": 0.5, "memory": "512Mi"})
    api.wait_status(running["id"], ("running",))
    # waits for this machine's CPUs while the fine-tuning runs
    cores = os.cpu_count() or 2
    waiting = api.submit(name="vit-large-pretrain" + suffix, **where, command=["python", example], replicas=1,
               resources={"cpu": cores, "memory": "1Gi"}, env={"STEPS": "100"})
    if with_gpu_pool:  # beyond the project's 8 GPUs on a100, and it may not borrow: it waits
        api.submit(name="llama-sft-70b", command="torchrun --nproc_per_node 8 sft.py", pool="a100", replicas=2,
                   resources={"gpu": 8, "cpu": 32, "memory": "256Gi"}, gpu_model="NVIDIA A100-SXM4-80GB")
    for process in sweep:
        output, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            raise SystemExit(f"a sweep run failed:\n{output}")
    by_name = {run["name"]: run["id"] for run in api.runs()}
    return {"running": running["id"], "sweep": [by_name[name] for name, *_ in sweep_runs],
            "started": [running["id"], waiting["id"]]}


# ---------------------------------------------------------------- the pictures

def take_screenshots(url: str, username: str, password: str, project: str, demo: dict, out: Path,
                     refresh_telemetry=None) -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox",
                                                                             "--disable-gpu"])
        context = browser.new_context(base_url=url, viewport=VIEWPORT, color_scheme="light")
        page = context.new_page()
        page.goto("/signin")
        page.locator("input[name=username]").fill(username)
        page.locator("input[name=password]").fill(password)
        page.get_by_test_id("signin-submit").click()
        page.wait_for_url(lambda u: "/signin" not in u, timeout=30_000)

        def shot(name: str, path: str, ready: str, settle_ms: int = 1200, scroll_to: str | None = None,
                 prepare=None) -> None:
            page.goto(path)
            expect(page.get_by_test_id(ready).first).to_be_visible(timeout=30_000)
            if prepare:
                prepare()
            if scroll_to:  # bring that part of the page up, just below the header
                page.evaluate("""([testid, offset]) => {
                    const el = document.querySelector(`[data-testid="${testid}"]`);
                    if (el) window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - offset);
                }""", [scroll_to, 150])
            page.wait_for_timeout(settle_ms)  # let charts and live frames draw; not an assertion
            target = out / f"{name}.png"
            page.screenshot(path=str(target))
            shots.append(target)
            log(f"saved {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")

        def fill_form() -> None:
            page.get_by_label(re.compile(r"^Name")).first.fill("resnet50-mixup")
            page.get_by_label(re.compile(r"^Command")).first.fill(
                "python examples/train.py --epochs 90 --mixup 0.2")
            page.get_by_label(re.compile(r"^Replicas")).first.fill("2")
            page.get_by_label(re.compile(r"^GPUs")).first.fill("8")
            page.get_by_test_id("max-runtime").first.fill("12h")
            try:  # the pool picker, when the project has several pools
                page.get_by_label(re.compile(r"^Pool")).first.click(timeout=3000)
                page.get_by_role("option", name=re.compile("a100")).first.click(timeout=3000)
            except Exception:  # noqa: BLE001 - a picture without it is still a picture
                page.keyboard.press("Escape")

        base = f"/projects/{project}"
        detail = f"{base}/workloads/training/{demo['running']}"
        shot("workloads", f"{base}/workloads", "workloads-table")
        shot("submit", f"{base}/workloads/new?kind=training", "submit-workload", settle_ms=500, prepare=fill_form)
        shot("runs", f"{base}/runs", "runs-table")
        shot("compare", f"{base}/compare?runs={','.join(map(str, demo['sweep']))}", "compare-chart", settle_ms=2000)
        if refresh_telemetry:  # ORM work: not in this thread, where Playwright's event loop runs
            with ThreadPoolExecutor(max_workers=1) as pool:
                pool.submit(refresh_telemetry).result()
        shot("cluster", "/cluster", "cluster-pools", settle_ms=2000)
        shot("quotas", f"{base}/quotas", "quotas-table")
        shot("detail", detail, "metrics-chart", settle_ms=3000)
        shot("detail-metrics", detail, "metrics-chart", settle_ms=3000, scroll_to="metrics-chart")
        shot("detail-logs", detail, "log-view", settle_ms=2000, scroll_to="log-view")
        page.get_by_test_id("theme-toggle").first.click()
        shot("detail-dark", detail, "metrics-chart", settle_ms=3000, scroll_to="metrics-chart")
        page.get_by_test_id("theme-toggle").first.click()  # leave the stored preference as it was
        context.close()
        browser.close()
    return shots


def main() -> int:
    args = parse_args()
    if not os.access(CHROMIUM, os.X_OK):
        raise SystemExit(f"Debian's chromium is needed at {CHROMIUM}: make chromium (apt-get install -y chromium)")
    if args.url:
        api = Api(args.url, args.username, args.password, args.project)
        demo = seed_through_api(api, with_gpu_pool=False, suffix=f"-{os.urandom(2).hex()}")
        try:
            take_screenshots(args.url, args.username, args.password, args.project, demo, args.out)
        finally:  # leave that Cairn as it was: stop the jobs this script started
            for workload_id in demo["started"]:
                api.http.post(api.project_url(f"training-jobs/{workload_id}/stop/"), timeout=30)
        return 0
    if not os.environ.get("DATABASE_URL"):
        # a private PostgreSQL and Redis for this run, like the tests
        os.execv(str(ROOT / "scripts" / "with-test-services.sh"),
                 [str(ROOT / "scripts" / "with-test-services.sh"), sys.executable, *sys.argv])
    tmp = Path(tempfile.mkdtemp(prefix="cairn-screenshots-"))
    server = None
    try:
        data_dir = tmp / "data"
        data_dir.mkdir()
        setup_django(data_dir)
        rows = seed_rows()
        log("starting Cairn")
        server = start_server(data_dir, tmp / "server.log")
        log(f"Cairn at {server.url}")
        api = Api(server.url, "ada", PASSWORD, PROJECT)
        demo = seed_through_api(api, with_gpu_pool=True, pool=rows["local"].pool.name)
        record_gpu_telemetry(rows["gpu_nodes"])
        take_screenshots(server.url, "ada", PASSWORD, PROJECT, demo, args.out,
                         refresh_telemetry=lambda: _closing_connections(record_gpu_telemetry, rows["gpu_nodes"]))
        return 0
    except BaseException:
        if (tmp / "server.log").exists():
            print((tmp / "server.log").read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
