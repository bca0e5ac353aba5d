"""Serving benchmark: the real inference load of alibaba-genai-2026 replayed through Cairn's
gateway against examples/serve_digits.py, with the autoscaler versus static provisioning at the
peak and at the mean, in one run; plus the gateway's own cost against calling a replica directly.

    .venv/bin/python bench/serving.py            # ~8 minutes on 2 CPUs; --no-record to only print

It starts `manage.py run_embedded` (SQLite, its own data folder, the demo project) on port 8250,
signs in as the demo admin and submits the deployments through the API, like a user would.

Trace: ../shared/data/traces/alibaba-genai-2026/qps.csv (or CAIRN_TRACE_DIR), QPS summed over
containers and request types per timestamp: 1,145 points over 22.3 h (mean 3.1, peak 9.6 QPS).
- Time is compressed so the whole day plays in --seconds (default 90) per scenario: each ~57 s
  trace step lasts 90 / 1,145 s (a factor of ~890).
- The rate is scaled so that the trace's peak is --peak-rps (default 40 requests/s), within
  what this 2-CPU machine serves with a replica doing WORK_MS=25 of CPU per request (~40 req/s
  for one core). Arrivals are Poisson (open loop, fixed seed), the same in every scenario.
- The autoscaler's windows are compressed too: stable 6 s (45 min of trace time), panic 1 s.
- Static peak: as many replicas as the autoscaler's maximum; static mean: the replicas the mean
  rate needs at the same target.

Replica-seconds: admitted replicas (Workload.replicas, sampled every 0.5 s) times time.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gateway_overhead  # noqa: E402
from benchmarks_doc import write_block  # noqa: E402

# Two copies on one machine: set CAIRN_BENCH_PORT / CAIRN_BENCH_DIRECT_PORT to other free ports.
PORT, DIRECT_PORT = int(os.environ.get("CAIRN_BENCH_PORT", 8250)), int(os.environ.get("CAIRN_BENCH_DIRECT_PORT", 8251))
TRACE = Path(os.environ.get("CAIRN_TRACE_DIR", ROOT.parent / "shared" / "data" / "traces")) / "alibaba-genai-2026" / "qps.csv"
SLO_MS = 250.0
WORK_MS = 25


def load_trace() -> list[float]:
    per_time: dict[float, float] = defaultdict(float)
    with open(TRACE) as f:
        for row in csv.DictReader(f):
            per_time[float(row["timestamp_anon"])] += float(row["value"])
    return [per_time[t] for t in sorted(per_time)]


def arrivals(trace: list[float], *, seconds: float, peak_rps: float, seed: int = 7) -> list[float]:
    """Poisson arrival times (s from the start) following the compressed, scaled trace."""
    rng = random.Random(seed)
    step = seconds / len(trace)
    scale = peak_rps / max(trace)
    out = []
    for i, qps in enumerate(trace):
        rate, t = qps * scale, i * step
        while rate > 0:
            t += rng.expovariate(rate)
            if t >= (i + 1) * step:
                break
            out.append(t)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else float("nan")


class Cairn:
    def __init__(self, data: Path, extra_env: dict | None = None):
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CAIRN_PUBLIC_URL")}
        env.update(CAIRN_MODE="embedded", CAIRN_DATA_DIR=str(data / "var"), DJANGO_SETTINGS_MODULE="config.settings",
                   PYTHONUNBUFFERED="1", CAIRN_SCHEDULER_INTERVAL="0.5", CAIRN_RECONCILER_INTERVAL="0.5")
        env.update(extra_env or {})
        self.log = data / "server.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen([sys.executable, "manage.py", "run_embedded", "--port", str(PORT)], cwd=ROOT,
                                            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{PORT}"
        deadline = time.monotonic() + 120
        while "Cairn is running" not in self.log.read_text():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"the server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.5)
        password = re.search(r"password '([^']+)'", self.log.read_text())[1]
        token = httpx.post(f"{self.url}/api/v1/auth/login/", json={"username": "admin", "password": password}).json()
        self.headers = {"Authorization": f"Bearer {token['token']}"}
        self.api = f"{self.url}/api/v1/projects/demo"

    def deploy(self, name: str, *, replicas: int, autoscaling: dict | None = None, work_ms: int = WORK_MS) -> int:
        body = {"name": name, "command": f"python {ROOT}/examples/serve_digits.py", "working_dir": str(ROOT),
                "replicas": replicas, "resources": {"cpu": 0.25, "memory": "1Gi"}, "readiness_path": "/healthz",
                "env": {"WORK_MS": str(work_ms)}}
        if autoscaling:
            body["autoscaling"] = autoscaling
        answer = httpx.post(f"{self.api}/deployments/", json=body, headers=self.headers, timeout=30)
        assert answer.status_code == 201, answer.text
        workload = answer.json()["id"]
        deadline = time.monotonic() + 180
        while True:
            status = httpx.get(f"{self.api}/deployments/{workload}/rollout/", headers=self.headers, timeout=30).json()
            if status.get("complete") and len(status["replicas"]) == replicas:
                return workload
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not get {replicas} ready replicas: {status}")
            time.sleep(0.5)

    def stop_workload(self, workload: int) -> None:
        httpx.post(f"{self.api}/deployments/{workload}/stop/", headers=self.headers, timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


FAILURES: dict[str, int] = defaultdict(int)


async def replay(url: str, headers: dict, times: list[float], *, sample=None) -> tuple[list[float], float]:
    """Send a request at each time; latencies in ms (errors and timeouts count as 10 s).
    `sample`: the URL of the deployment, whose admitted replicas are summed every 0.5 s."""
    latencies: list[float] = []
    replica_seconds = 0.0
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(headers=headers, timeout=10, limits=limits) as client:
        start = time.monotonic()

        async def one(at: float, n: int):
            await asyncio.sleep(max(0.0, start + at - time.monotonic()))
            sent = time.monotonic()
            try:
                answer = await client.get(f"{url}predict?sample={n % 450}")
                ok = answer.status_code == 200
                if not ok:
                    FAILURES[f"{answer.status_code} {answer.text[:80]}"] += 1
            except httpx.HTTPError as exc:
                ok = False
                FAILURES[type(exc).__name__] += 1
            latencies.append((time.monotonic() - sent) * 1000 if ok else 10_000.0)

        async def sampler():
            nonlocal replica_seconds
            last = time.monotonic()
            replicas = 1
            while True:
                await asyncio.sleep(0.5)
                try:
                    replicas = (await client.get(sample)).json()["replicas"]
                except (httpx.HTTPError, ValueError, KeyError):
                    pass  # keep the last count
                now = time.monotonic()
                replica_seconds += (now - last) * replicas
                last = now

        watcher = asyncio.create_task(sampler()) if sample else None
        await asyncio.gather(*(one(at, n) for n, at in enumerate(times)))
        if watcher:
            watcher.cancel()
    return latencies, replica_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0, help="replay length per scenario")
    parser.add_argument("--peak-rps", type=float, default=40.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    trace = load_trace()
    times = arrivals(trace, seconds=args.seconds, peak_rps=args.peak_rps)
    mean_rps = len(times) / args.seconds
    per_replica = 1000 / WORK_MS * 0.6  # requests/s a replica serves at 60% of a core
    peak_replicas = math.ceil(args.peak_rps / per_replica)
    mean_replicas = max(1, math.ceil(mean_rps / per_replica))
    print(f"trace: {len(trace)} points, mean {statistics.mean(trace):.2f} QPS, peak {max(trace):.2f}; replay "
          f"{len(times)} requests in {args.seconds:g}s (mean {mean_rps:.1f}/s, peak {args.peak_rps:g}/s); "
          f"static peak {peak_replicas} replicas, static mean {mean_replicas}")

    with tempfile.TemporaryDirectory(prefix="cairn-bench-serving-") as tmp:
        cairn = Cairn(Path(tmp))
        try:
            # 1. The gateway's own cost (bench/gateway_overhead.py): one request at a time, then wrk.
            overhead = gateway_overhead.measure(cairn, samples=2000, seconds=10, rounds=3, connections=8)
            print(gateway_overhead.report(overhead, "(part of bench/serving.py)"))

            # 2. The trace, three ways.
            scenarios = [
                ("autoscaler", dict(replicas=1, autoscaling={
                    "min_replicas": 1, "max_replicas": peak_replicas, "target_concurrency": 1.0,
                    "stable_window_seconds": 6, "panic_window_seconds": 1})),
                ("static peak", dict(replicas=peak_replicas)),
                ("static mean", dict(replicas=mean_replicas)),
            ]
            results = []
            for label, kwargs in scenarios:
                name = "digits-" + label.replace(" ", "-")
                workload = cairn.deploy(name, **kwargs)
                latencies, replica_seconds = asyncio.run(replay(
                    f"{cairn.url}/serve/demo/{name}/", cairn.headers, times,
                    sample=f"{cairn.api}/deployments/{workload}/" if "autoscaling" in kwargs else None))
                if "autoscaling" not in kwargs:
                    replica_seconds = kwargs["replicas"] * args.seconds
                over = sum(1 for v in latencies if v > SLO_MS) / len(latencies) * 100
                results.append((label, pct(latencies, 50), pct(latencies, 99), over, replica_seconds))
                print(f"{label:12} p50 {results[-1][1]:7.1f} ms  p99 {results[-1][2]:8.1f} ms  over {SLO_MS:g} ms: "
                      f"{over:5.2f}%  replica-seconds {replica_seconds:6.1f}  failures {dict(FAILURES)}")
                FAILURES.clear()
                cairn.stop_workload(workload)
                time.sleep(3)
        finally:
            cairn.stop()

    peak_rs = next(r[4] for r in results if r[0] == "static peak")
    lines = [
        f"Command: `.venv/bin/python bench/serving.py --seconds {args.seconds:g} --peak-rps {args.peak_rps:g}` "
        f"(2 shared CPUs; {time.strftime('%Y-%m-%d')}).",
        "",
        f"Replay: {len(times)} requests in {args.seconds:g} s per scenario (the 22.3 h trace compressed "
        f"~{22.3 * 3600 / args.seconds:.0f}x; rate scaled so its peak is {args.peak_rps:g} req/s, mean "
        f"{mean_rps:.1f} req/s; Poisson arrivals, the same in each scenario). Each request costs the replica "
        f"{WORK_MS} ms of CPU. SLO: {SLO_MS:g} ms.",
        "",
        "| provisioning | p50 | p99 | over the SLO | replica-seconds | vs static peak |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, p50, p99, over, rs in results:
        lines.append(f"| {label} | {p50:.1f} ms | {p99:.1f} ms | {over:.2f}% | {rs:.0f} | {rs / peak_rs * 100:.0f}% |")
    body = "\n".join(lines)
    print(body)
    if not args.no_record:
        write_block(section="## Serving", intro="bench/serving.py: the alibaba-genai-2026 inference load through the "
                    "gateway, autoscaler vs static provisioning, and the gateway's own cost.",
                    prefix="serving", key="replay", block_body=body)
        gateway_overhead.record(overhead, f".venv/bin/python bench/serving.py --seconds {args.seconds:g} "
                                          f"--peak-rps {args.peak_rps:g}")


if __name__ == "__main__":
    main()
