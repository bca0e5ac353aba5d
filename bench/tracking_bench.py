"""Tracking benchmarks, Cairn side by side with MLflow's tracking server, same PostgreSQL.

    scripts/with-test-services.sh .venv/bin/python bench/tracking_bench.py --part all

with-test-services.sh gives a private PostgreSQL and Redis (DATABASE_URL / REDIS_URL); this
script creates the databases `cairn_bench` and `mlflow_bench` in that PostgreSQL, migrates
Cairn, installs MLflow into its own venv (var/bench-mlflow-venv) if missing, starts both
servers with the same number of worker processes and measures:

  a. ingestion: 8 concurrent writer processes, 1,000-point batches (MLflow's log_batch limit);
  b. a chart read of a 1,000,000-point series (<= 1,000 points back) with injected spikes;
  c. live latency: runs logging at 10 Hz through the SDK, websocket subscribers, cairn.log -> frame.

Figures are printed and written into the "## Tracking" section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import requests
from benchmarks_doc import write_block

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
SECTION = "## Tracking"
MLFLOW_VENV = ROOT / "var" / "bench-mlflow-venv"
MLFLOW_PINS = ["mlflow==3.6.0", "psycopg2-binary==2.9.11", "sqlalchemy==2.0.44"]  # mlflow 3.6 breaks on SQLAlchemy 2.1
T0 = 1_750_000_000.0


# ---- plumbing ----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def database_urls() -> tuple[str, str]:
    base = os.environ.get("DATABASE_URL")
    if not base or not base.startswith("postgres"):
        sys.exit("DATABASE_URL must point at PostgreSQL: run under scripts/with-test-services.sh")
    import psycopg

    parts = urllib.parse.urlsplit(base)
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in ("cairn_bench", "mlflow_bench"):
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
    return parts._replace(path="/cairn_bench").geturl(), parts._replace(path="/mlflow_bench").geturl()


def wait_up(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up")


def start_cairn(db_url: str, workers: int, log: Path, app: str = "config.asgi:application") -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "CAIRN_MODE": "server", "DJANGO_SETTINGS_MODULE": "tracking_settings",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)]), "LOG_LEVEL": "WARNING",
           "DB_CONN_MAX_AGE": "600"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers), "--log-level", "warning",
                             "--no-access-log"], cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(f"{url}/healthz")
    return proc, url


def ensure_mlflow() -> Path:
    binary = MLFLOW_VENV / "bin" / "mlflow"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(MLFLOW_VENV)], check=True)
        subprocess.run([str(MLFLOW_VENV / "bin" / "pip"), "install", "-q", *MLFLOW_PINS], check=True)
    return binary


def start_mlflow(db_url: str, workers: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    store = db_url.replace("postgres://", "postgresql://", 1)
    proc = subprocess.Popen([str(ensure_mlflow()), "server", "--backend-store-uri", store, "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers),
                             "--default-artifact-root", str(ROOT / "var" / "bench-mlflow-artifacts")],
                            env={**os.environ, "PATH": f"{MLFLOW_VENV / 'bin'}:{os.environ['PATH']}"},
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(f"{url}/health", timeout=180)
    return proc, url


def stop(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def setup_django(db_url: str):
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from apps.accounts.services import api_token_create
    from apps.projects.models import Membership, Project
    from tests.factories import UserFactory

    user = UserFactory(username="bench")
    project, _ = Project.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": "owner"})
    _, token = api_token_create(user=user, name="bench")
    return project, token


def cairn_runs(project, n: int, prefix: str) -> list[tuple[int, str]]:
    from apps.tracking.services import run_create, run_token_create

    out = []
    for i in range(n):
        run, _ = run_create(project=project, name=f"{prefix}-{i}")
        out.append((run.pk, run_token_create(run=run)))
    return out


def mlflow_runs(url: str, n: int, name: str) -> list[str]:
    experiment = requests.post(f"{url}/api/2.0/mlflow/experiments/create", json={"name": f"{name}-{time.time()}"},
                               timeout=30).json()["experiment_id"]
    return [requests.post(f"{url}/api/2.0/mlflow/runs/create", json={"experiment_id": experiment,
                                                                      "run_name": f"{name}-{i}"},
                          timeout=30).json()["run"]["info"]["run_id"] for i in range(n)]


# ---- a. ingestion ---------------------------------------------------------------------------------

KEYS = ("loss", "accuracy", "lr", "grad_norm")


def _batch_points(batch: int, size: int) -> list[tuple[str, int, float, float]]:
    per_key = size // len(KEYS)
    return [(key, batch * per_key + i, random.random(), T0 + batch * per_key + i)
            for key in KEYS for i in range(per_key)]


def _request(system: str, url: str, target, batch: int, size: int) -> tuple[str, bytes, dict]:
    points = _batch_points(batch, size)
    if system == "cairn":
        run_id, token = target
        body = json.dumps({"batch_id": f"b{batch}", "points": [
            {"key": k, "step": s, "value": v, "time": t} for k, s, v, t in points]})
        return (f"{url}/api/v1/projects/bench/runs/{run_id}/batches/", body.encode(),
                {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    body = json.dumps({"run_id": target, "metrics": [
        {"key": k, "step": s, "value": v, "timestamp": int(t * 1000)} for k, s, v, t in points]})
    return f"{url}/api/2.0/mlflow/runs/log-batch", body.encode(), {"Content-Type": "application/json"}


def _writer(system: str, url: str, target, batches: int, size: int, barrier, queue) -> None:
    # Every request body is serialized before the clock starts (for both systems): what is
    # measured is the servers' ingestion, not the clients' JSON encoding on the same 2 CPUs.
    # One keep-alive connection per writer through http.client (lighter than requests on the
    # CPUs the servers share; the same client for both systems).
    import http.client

    requests_ = [_request(system, url, target, batch, size) for batch in range(batches)]
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    latencies = []
    barrier.wait()
    for endpoint, body, headers in requests_:
        started = time.perf_counter()
        conn.request("POST", urllib.parse.urlsplit(endpoint).path, body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read()
        latencies.append(time.perf_counter() - started)
        if response.status >= 300:
            raise RuntimeError(f"{system}: HTTP {response.status}: {answer[:300]!r}")
    conn.close()
    queue.put((latencies, time.time()))


def ingest(system: str, url: str, targets: list, total: int, size: int = 1000) -> dict:
    writers = len(targets)
    batches = total // size // writers
    queue = multiprocessing.Queue()
    barrier = multiprocessing.Barrier(writers + 1)
    procs = [multiprocessing.Process(target=_writer, args=(system, url, t, batches, size, barrier, queue))
             for t in targets]
    for p in procs:
        p.start()
    barrier.wait()  # every writer has its bodies ready
    start_at = time.time()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = [x for lat, _ in results for x in lat]
    elapsed = max(end for _, end in results) - start_at
    points = batches * size * writers
    return {"points": points, "seconds": elapsed, "points_per_s": points / elapsed,
            "p50_ms": pct(latencies, 50) * 1000, "p99_ms": pct(latencies, 99) * 1000}


def part_a(ctx, args) -> str:
    print("a. ingestion ...", flush=True)
    cairn_runs_, mlflow_runs_ = [], []
    for rep in range(args.repeat):  # alternate, so that both see the same (shared, noisy) machine
        cairn = ingest("cairn", ctx["cairn_url"], cairn_runs(ctx["project"], 8, f"ingest{rep}"), args.points)
        print("  cairn ", cairn, flush=True)
        mlflow = ingest("mlflow", ctx["mlflow_url"], mlflow_runs(ctx["mlflow_url"], 8, f"ingest{rep}"),
                        args.mlflow_points)
        print("  mlflow", mlflow, flush=True)
        cairn_runs_.append(cairn)
        mlflow_runs_.append(mlflow)
    ratios = sorted(c["points_per_s"] / m["points_per_s"] for c, m in zip(cairn_runs_, mlflow_runs_, strict=True))
    ratio = ratios[len(ratios) // 2]

    def median(results, field):
        return sorted(r[field] for r in results)[len(results) // 2]

    rows = ""
    for name, results in (("Cairn", cairn_runs_), (f"MLflow {MLFLOW_PINS[0].split('==')[1]}", mlflow_runs_)):
        rates = ", ".join(f"{r['points_per_s']:,.0f}" for r in results)
        rows += (f"| {name} | {results[0]['points']:,} | {median(results, 'seconds'):.1f} s | "
                 f"**{median(results, 'points_per_s'):,.0f}** ({rates}) | {median(results, 'p50_ms'):.0f} ms | "
                 f"{median(results, 'p99_ms'):.0f} ms |\n")
    mlflow_rate = median(mlflow_runs_, "points_per_s")
    return (
        f"### a. Ingestion{_entry_note(args)}\n\n"
        f"8 writer processes, 1,000-point batches (4 keys x 250 steps, bodies serialized before the clock starts, one "
        f"keep-alive connection each), {args.workers} server worker processes each, server entry `{args.asgi}`. "
        f"{args.repeat} repetitions, Cairn and MLflow alternating; medians (each repetition's rate in brackets). "
        f"Cairn ingests {args.points:,} points per repetition; MLflow {mlflow_runs_[0]['points']:,} (`--mlflow-points`: "
        f"its rate is flat over a run, and 2,000,000 would take it {2_000_000 / mlflow_rate / 60:.0f} minutes here).\n\n"
        "| system | points | wall time | sustained points/s | p50 batch | p99 batch |\n|---|---|---|---|---|---|\n"
        f"{rows}\n"
        f"Cairn / MLflow points/s, median of the repetitions' ratios ({', '.join(f'{r:.1f}x' for r in ratios)}): "
        f"**{ratio:.1f}x** (target >= 20x: {'met' if ratio >= 20 else 'NOT met'}).\n"
    )


# ---- b. chart read ------------------------------------------------------------------------------------

def _series(n: int, spikes: int, seed: int = 7) -> tuple[list[float], set[int]]:
    rng = random.Random(seed)
    values = [1.0 / (1 + i / 1000) + rng.uniform(-0.01, 0.01) for i in range(n)]
    spacing = n // spikes
    steps = {k * spacing + rng.randrange(spacing // 4, 3 * spacing // 4) for k in range(spikes)}
    for step in steps:
        values[step] = 50.0 + rng.random()
    return values, steps


def _load_mlflow_directly(db_url: str, run_id: str, values: list[float]) -> None:
    """Rows straight into MLflow's tables with COPY (its ingestion is measured in a.; this is about reads)."""
    import psycopg

    with psycopg.connect(db_url) as conn, conn.cursor() as cur:
        with cur.copy("COPY metrics (key, value, timestamp, run_uuid, step, is_nan) FROM STDIN") as copy:
            for step, value in enumerate(values):
                copy.write_row(("loss", value, int((T0 + step) * 1000), run_id, step, False))
        cur.execute("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                    "VALUES ('loss', %s, %s, %s, false, %s)",
                    (values[-1], int((T0 + len(values) - 1) * 1000), len(values) - 1, run_id))


def part_b(ctx, args) -> str:
    print("b. chart read ...", flush=True)
    n = args.series_points
    values, spikes = _series(n, 100)
    (run_id, token), = cairn_runs(ctx["project"], 1, "read")
    session = requests.Session()
    started = time.perf_counter()
    for start in range(0, n, 20_000):
        body = {"points": [{"key": "loss", "step": s, "value": values[s], "time": T0 + s}
                           for s in range(start, min(n, start + 20_000))]}
        r = session.post(f"{ctx['cairn_url']}/api/v1/projects/bench/runs/{run_id}/batches/", json=body,
                         headers={"Authorization": f"Bearer {token}"}, timeout=300)
        r.raise_for_status()
    load_s = time.perf_counter() - started
    headers = {"Authorization": f"Bearer {ctx['token']}"}
    url = f"{ctx['cairn_url']}/api/v1/projects/bench/runs/{run_id}/series/?key=loss&max_points=1000"
    session.get(url, headers=headers).raise_for_status()  # warm the connection and the caches
    cairn_times, body = [], None
    for _ in range(args.reads):
        t = time.perf_counter()
        body = session.get(url, headers=headers, timeout=60).json()
        cairn_times.append(time.perf_counter() - t)
    returned = {step for step, _ in body["points"]}
    cairn_spikes = len(spikes & returned)
    print(f"  cairn p50 {pct(cairn_times, 50) * 1000:.1f} ms, {len(body['points'])} points, "
          f"spikes {cairn_spikes}/{len(spikes)}", flush=True)

    mrun, = mlflow_runs(ctx["mlflow_url"], 1, "read")
    _load_mlflow_directly(ctx["mlflow_db"], mrun, values)
    full_url = f"{ctx['mlflow_url']}/api/2.0/mlflow/metrics/get-history"
    full_times, full_points = [], 0
    for _ in range(args.mlflow_reads):
        t = time.perf_counter()
        token_, got = None, 0
        while True:  # the client's get_metric_history pages through everything
            params = {"run_id": mrun, "metric_key": "loss", "max_results": 25000}
            if token_:
                params["page_token"] = token_
            data = session.get(full_url, params=params, timeout=600).json()
            got += len(data.get("metrics", []))
            token_ = data.get("next_page_token")
            if not token_:
                break
        full_times.append(time.perf_counter() - t)
        full_points = got
    ui_url = f"{ctx['mlflow_url']}/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval"
    ui_times, ui = [], None
    for _ in range(args.mlflow_ui_reads):
        t = time.perf_counter()
        ui = session.get(ui_url, params={"run_ids": mrun, "metric_key": "loss", "max_results": 1000},
                         timeout=600).json()
        ui_times.append(time.perf_counter() - t)
    ui_steps = {int(m.get("step", 0)) for m in ui.get("metrics", [])}
    ui_spikes = len(spikes & ui_steps)
    print(f"  mlflow full p50 {pct(full_times, 50):.2f} s ({full_points} points); sampled p50 "
          f"{pct(ui_times, 50) * 1000:.0f} ms, spikes {ui_spikes}", flush=True)
    p50 = pct(cairn_times, 50) * 1000
    return (
        "### b. Chart read of a 1,000,000-point series\n\n"
        f"{n:,} points of one key with 100 injected spikes (one per 1% of the steps); "
        f"Cairn loaded over HTTP in {load_s:.0f} s (20,000-point batches), MLflow's rows COPYed straight into its "
        f"`metrics` table (reads are what is measured). {args.reads} sequential reads "
        f"({args.mlflow_reads} for MLflow's full history, {args.mlflow_ui_reads} for its sampled read).\n\n"
        "| request | points returned | p50 | p99 (max when few reads) | spikes present |\n|---|---|---|---|---|\n"
        f"| Cairn `series/?max_points=1000` | {len(body['points'])} | {p50:.1f} ms | {pct(cairn_times, 99) * 1000:.1f} ms "
        f"| {cairn_spikes}/{len(spikes)} |\n"
        f"| MLflow `get-history` (what `MlflowClient.get_metric_history` does, paged) | {full_points:,} | "
        f"{pct(full_times, 50) * 1000:,.0f} ms | {max(full_times) * 1000:,.0f} ms (max of {len(full_times)}) | "
        f"{len(spikes)}/{len(spikes)} (all points) |\n"
        f"| MLflow UI `get-history-bulk-interval?max_results=1000` (sampled) | {len(ui_steps)} | "
        f"{pct(ui_times, 50) * 1000:.0f} ms | {max(ui_times) * 1000:.0f} ms (max of {len(ui_times)}) | {ui_spikes}/{len(spikes)} |\n\n"
        f"Cairn p50 {p50:.1f} ms (target <= 50 ms: {'met' if p50 <= 50 else 'NOT met'}); "
        f"{pct(full_times, 50) / pct(cairn_times, 50):,.0f}x faster than MLflow's full read and "
        f"{pct(ui_times, 50) / pct(cairn_times, 50):.1f}x faster than its sampled UI read, which keeps "
        f"{ui_spikes} of the {len(spikes)} spikes; Cairn keeps {cairn_spikes / len(spikes):.0%}.\n"
    )


# ---- c. live latency ------------------------------------------------------------------------------------

def _subscribers(ws_base: str, token: str, run_ids: list[int], per_run: int, seconds: float, queue) -> None:
    import websockets

    latencies: list[float] = []

    async def one(run_id: int):
        url = f"{ws_base}/ws/projects/bench/runs/{run_id}/live/"
        # The token goes in the subprotocols (docs/live.md), never in the URL.
        async with websockets.connect(url, subprotocols=["cairn.v1", f"cairn.token.{token}"], max_size=2**24) as ws:
            deadline = time.time() + seconds
            while time.time() < deadline:
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=max(0.1, deadline - time.time()))
                except TimeoutError:
                    break
                now = time.time()
                frame = json.loads(raw)
                for rows in frame.get("points", {}).values():
                    latencies.extend(now - row[2] for row in rows)

    async def main():
        await asyncio.gather(*(one(r) for r in run_ids for _ in range(per_run)))

    asyncio.run(main())
    queue.put(latencies)


def _loggers(url: str, runs: list[tuple[int, str]], hz: float, seconds: float, flush_interval: float, queue) -> None:
    sys.path.insert(0, str(ROOT / "sdk"))
    from cairn.tracking.run import Run

    objs = [Run(url=url, project="bench", run_id=r, run_token=t, system_metrics=False, flush_interval=flush_interval)
            for r, t in runs]
    period = 1.0 / hz
    step = 0
    next_tick = time.monotonic()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for run in objs:
            run.log({"loss": random.random()}, step=step)
        step += 1
        next_tick += period
        time.sleep(max(0.0, next_tick - time.monotonic()))
    for run in objs:
        run.finish(timeout=30)
    queue.put(step * len(objs))


def part_c(ctx, args) -> str:
    print("c. live latency ...", flush=True)
    runs = cairn_runs(ctx["project"], args.live_runs, "live")
    ws_base = ctx["cairn_url"].replace("http://", "ws://")
    per_run = args.subscribers // args.live_runs
    queue = multiprocessing.Queue()
    subs = multiprocessing.Process(target=_subscribers, args=(ws_base, ctx["token"], [r for r, _ in runs], per_run,
                                                              args.live_seconds + 8, queue))
    subs.start()
    time.sleep(4.0)  # let every subscriber connect
    logger_queue = multiprocessing.Queue()
    logger = multiprocessing.Process(target=_loggers, args=(ctx["cairn_url"], runs, 10.0, args.live_seconds,
                                                            args.flush_interval, logger_queue))
    logger.start()
    logged = logger_queue.get()
    logger.join()
    latencies = queue.get()
    subs.join()
    expected = logged * per_run
    p50, p99 = pct(latencies, 50) * 1000, pct(latencies, 99) * 1000
    print(f"  {len(latencies)}/{expected} deliveries, p50 {p50:.0f} ms, p99 {p99:.0f} ms", flush=True)
    return (
        f"### c. Live latency{_entry_note(args)}\n\n"
        f"{args.live_runs} runs logging one metric at 10 Hz for {args.live_seconds:.0f} s through the SDK "
        f"(`flush_interval={args.flush_interval}`), {per_run * args.live_runs} websocket subscribers "
        f"({per_run} per run, one client process), {args.workers} server worker processes, server entry `{args.asgi}`, "
        f"{_channel_layer()}; "
        "latency = frame received - the wall time `cairn.log` stamped on the point.\n\n"
        "| deliveries (point x subscriber) | p50 | p99 | max |\n|---|---|---|---|\n"
        f"| {len(latencies):,} of {expected:,} | {p50:.0f} ms | {p99:.0f} ms | {max(latencies) * 1000:.0f} ms |\n\n"
        f"Target p99 <= 250 ms: {'met' if p99 <= 250 else 'NOT met'}.\n"
    )


def _channel_layer() -> str:
    from django.conf import settings  # the server's settings: tracking_settings is config.settings plus a rate

    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    return "Redis pub/sub channel layer" if backend.endswith("RedisPubSubChannelLayer") else \
        "Redis channel layer" if backend.endswith("RedisChannelLayer") else f"channel layer `{backend}`"


def _entry_note(args) -> str:
    if args.asgi == "config.asgi:application":
        return ""
    return " (with the ingestion entry)" if args.asgi in ("config.asgi:application", "apps.tracking.asgi:application") else f" ({args.asgi})"


# ---- docs -----------------------------------------------------------------------------------------------

def record(key: str, body: str, command: str) -> None:
    body = f"{body.strip()}\n\nCommand: `{command}` ({os.cpu_count()} CPUs, Python {sys.version.split()[0]}, " \
           f"PostgreSQL from scripts/with-test-services.sh: fsync off for both systems)."
    write_block(section=SECTION, prefix="tracking", key=key, block_body=body, doc=DOC,
                intro="Tracking benchmarks (bench/tracking_bench.py) against MLflow's tracking server on the same "
                      "PostgreSQL; each block is rewritten by the script.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["a", "b", "c", "all"], default="all")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes, both systems")
    parser.add_argument("--points", type=int, default=2_000_000, help="a: points Cairn ingests")
    parser.add_argument("--mlflow-points", type=int, default=200_000, help="a: points MLflow ingests")
    parser.add_argument("--repeat", type=int, default=3, help="a: repetitions (Cairn and MLflow alternating)")
    parser.add_argument("--asgi", default="config.asgi:application",
                        help="Cairn's ASGI application (apps.tracking.asgi:application: with the ingestion entry)")
    parser.add_argument("--series-points", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--mlflow-reads", type=int, default=3, help="b: MLflow full-history reads (~7 s per 100k points)")
    parser.add_argument("--mlflow-ui-reads", type=int, default=10, help="b: MLflow sampled (UI) reads")
    parser.add_argument("--live-runs", type=int, default=50)
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--live-seconds", type=float, default=30)
    parser.add_argument("--flush-interval", type=float, default=0.1, help="c: the SDK's sender interval")
    parser.add_argument("--label", default="", help="suffix of the docs block (e.g. -small), to keep several settings")
    parser.add_argument("--no-record", action="store_true", help="print only; do not edit docs/benchmarks.md")
    args = parser.parse_args()
    command = "scripts/with-test-services.sh .venv/bin/python bench/tracking_bench.py " + " ".join(sys.argv[1:])

    cairn_db, mlflow_db = database_urls()
    project, token = setup_django(cairn_db)
    logs = ROOT / "var" / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    cairn_proc, cairn_url = start_cairn(cairn_db, args.workers, logs / "cairn.log", args.asgi)
    need_mlflow = args.part in ("a", "b", "all")
    mlflow_proc, mlflow_url = start_mlflow(mlflow_db, args.workers, logs / "mlflow.log") if need_mlflow else (None, "")
    ctx = {"project": project, "token": token, "cairn_url": cairn_url, "mlflow_url": mlflow_url,
           "mlflow_db": mlflow_db}
    try:
        from django.db import connections

        connections.close_all()
        for key, fn in (("a", part_a), ("b", part_b), ("c", part_c)):
            if args.part in (key, "all"):
                if key == "c" and mlflow_proc is not None:  # c is Cairn only: give it the whole machine
                    stop(mlflow_proc)
                    mlflow_proc = None
                body = fn(ctx, args)
                print(body)
                if not args.no_record:
                    record(key + args.label, body, command)
                connections.close_all()
    finally:
        stop(cairn_proc)
        if mlflow_proc is not None:
            stop(mlflow_proc)


if __name__ == "__main__":
    main()
