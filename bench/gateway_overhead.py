"""The deployment gateway's own cost, against calling the same kind of replica directly, in one run.

    .venv/bin/python bench/gateway_overhead.py      # ~3 minutes; --no-record to only print

(bench/serving.py runs the same measurement before its trace replay.) It starts `manage.py
run_embedded` on port 8250 (bench/serving.py's Cairn), deploys examples/serve_digits.py with no
extra work per request (WORK_MS=0), and starts a second copy of it on 127.0.0.1:8251 to call
directly. Three measures:

1. Added latency, one request at a time: --samples sequential GETs each way on one kept-alive
   connection, direct and through the gateway alternating, so both see the same machine. The
   Python client's own cost is the same on both paths and cancels out of the difference.
2. Throughput: wrk (compiled, epoll; Debian's `wrk`, installed with apt-get when missing) with
   --connections connections on one thread, --rounds rounds of --seconds each way, alternating;
   the medians. The client then costs little next to the servers it measures.
3. Latency under load: wrk's p50/p99 during those rounds (queueing for the CPUs included).

Plus CPU time per request of each process (psutil, user + system), which the machine's other
load does not inflate: Cairn's server process, the replica, and on the gateway path the replica's
sandbox bridge (bubblewrap replicas are reached through a unix-socket bridge, apps/backends/local/bridge.py).

The gateway's replica runs sandboxed when bubblewrap works here (the default), so its path holds
one more hop than the direct one: the bridge. With --unsandboxed (CAIRN_SANDBOX=off) the gateway
reaches its replica on a TCP port, like the direct call, and the difference is the gateway alone.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from benchmarks_doc import write_block  # noqa: E402

DIRECT_PORT = 8251


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * q // 100) - 1)] if ordered else float("nan")


def ensure_wrk() -> tuple[str, str]:
    """wrk's path, and how it came to be there."""
    found = shutil.which("wrk")
    if found:
        return found, "already installed"
    print("wrk is missing: apt-get install -y wrk", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(["apt-get", "install", "-y", "wrk"], env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "wrk"], env=env, capture_output=True, check=True)
    return shutil.which("wrk"), "installed by this run with apt-get"


def _seconds(value: str, unit: str) -> float:
    return float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[unit]


def wrk(url: str, headers: dict, *, seconds: float, connections: int) -> dict:
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", url]
    for name, value in headers.items():
        argv[1:1] = ["-H", f"{name}: {value}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    latency = {q: _seconds(*re.search(rf"^\s+{q}%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M).groups()) * 1000
               for q in (50, 99)}
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]),
            "requests": int(re.search(r"(\d+) requests in", out)[1]), "p50": latency[50], "p99": latency[99]}


class CpuMeter:
    """CPU seconds (user + system) of named groups of processes."""

    def __init__(self, groups: dict[str, list[psutil.Process]]):
        self.groups = groups

    def read(self) -> dict[str, float]:
        out = {}
        for name, processes in self.groups.items():
            total = 0.0
            for process in processes:
                try:
                    times = process.cpu_times()
                    total += times.user + times.system
                except psutil.NoSuchProcess:
                    pass
            out[name] = total
        return out


def replica_processes(data_dir: str) -> dict[str, list[psutil.Process]]:
    """The deployment's serving command and (sandboxed) its unix-socket bridge. The local backend
    starts each replica under a shim of its own, detached from the server, whose command line names
    a file in the server's data folder: they are found below it."""
    command, bridge = [], []
    for process in psutil.process_iter():
        try:
            if not any(data_dir in arg for arg in process.cmdline()) or "shim.py" not in " ".join(process.cmdline()):
                continue
            for child in process.children(recursive=True):
                argv = child.cmdline()
                if argv[-1:] == [str(ROOT / "examples" / "serve_digits.py")]:
                    command.append(child)
                elif argv[1:4] == ["-I", "-S", "-c"] and any(data_dir in arg for arg in argv[4:]):
                    bridge.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {"replica": command, "bridge": bridge}


def measure(cairn, *, samples: int, seconds: float, rounds: int, connections: int) -> dict:
    """All figures, from a running bench/serving.Cairn. Deploys `digits-gw` and stops it after."""
    ensure_wrk()
    workload = cairn.deploy("digits-gw", replicas=1, work_ms=0)
    direct = subprocess.Popen([sys.executable, str(ROOT / "examples" / "serve_digits.py")], cwd=ROOT,
                              env={**os.environ, "PORT": str(DIRECT_PORT), "WORK_MS": "0"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        direct_url = f"http://127.0.0.1:{DIRECT_PORT}/predict?sample=3"
        gateway_url = f"{cairn.url}/serve/demo/digits-gw/predict?sample=3"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{DIRECT_PORT}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the direct replica did not start")
            time.sleep(0.3)
        groups = {"cairn": [psutil.Process(cairn.process.pid)], "direct": [psutil.Process(direct.pid)],
                  **replica_processes(str(cairn.log.parent))}
        meter = CpuMeter(groups)
        paths = {"direct": (direct_url, {}), "gateway": (gateway_url, cairn.headers)}

        # 1. One request at a time, alternating.
        sequential = {"direct": [], "gateway": []}
        with httpx.Client() as d, httpx.Client(headers=cairn.headers) as g:
            clients = {"direct": d, "gateway": g}
            for _ in range(200):  # warm up both paths
                for name, (url, _) in paths.items():
                    clients[name].get(url)
            for _ in range(samples):
                for name, (url, _) in paths.items():
                    started = time.perf_counter()
                    answer = clients[name].get(url)
                    sequential[name].append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200, answer.text

        # 2 and 3. wrk, alternating rounds.
        wrk(gateway_url, cairn.headers, seconds=2, connections=connections)  # warm up
        loaded = {"direct": [], "gateway": []}
        cpu = {"direct": [], "gateway": []}
        for _ in range(rounds):
            for name, (url, headers) in paths.items():
                before = meter.read()
                result = wrk(url, headers, seconds=seconds, connections=connections)
                after = meter.read()
                loaded[name].append(result)
                cpu[name].append({group: (after[group] - before[group]) / result["requests"] * 1000
                                  for group in groups})
    finally:
        direct.terminate()
        direct.wait(10)
        cairn.stop_workload(workload)

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in loaded[name])

    def cpu_per_request(name: str, group: str) -> float:
        return statistics.median(c[group] for c in cpu[name])

    return {
        "samples": samples, "seconds": seconds, "rounds": rounds, "connections": connections,
        "sandboxed": bool(groups["bridge"]),
        "sequential": {name: {"p50": pct(v, 50), "p99": pct(v, 99)} for name, v in sequential.items()},
        "added_p50": statistics.median(g - d for d, g in zip(sequential["direct"], sequential["gateway"], strict=True)),
        "loaded": {name: {key: median(name, key) for key in ("rps", "p50", "p99")} for name in loaded},
        "rounds_rps": {name: [r["rps"] for r in loaded[name]] for name in loaded},
        "cpu": {"direct": {"replica": cpu_per_request("direct", "direct")},
                "gateway": {group: cpu_per_request("gateway", group) for group in ("cairn", "replica", "bridge")}},
        "load": os.getloadavg(),
    }


def report(figures: dict, command: str) -> str:
    seq, loaded, cpu = figures["sequential"], figures["loaded"], figures["cpu"]
    share = loaded["gateway"]["rps"] / loaded["direct"]["rps"] * 100
    path = ("a sandboxed replica, reached through its unix-socket bridge" if figures["sandboxed"]
            else "an unsandboxed replica on a TCP port (CAIRN_SANDBOX=off)")
    lines = [
        f"Command: `{command}` (2 CPUs shared with other work; load average {figures['load'][0]:.1f} / "
        f"{figures['load'][1]:.1f} over 1 / 5 min at the end; {time.strftime('%Y-%m-%d')}). One replica of "
        f"examples/serve_digits.py (WORK_MS=0) behind the gateway, {path}; the same app on a TCP port for the "
        "direct calls. Client, Cairn and replicas share the 2 CPUs.",
        "",
        f"One request at a time ({figures['samples']} GETs each way on one kept-alive connection, direct and "
        "gateway alternating):",
        "",
        "| path | p50 | p99 |",
        "|---|---:|---:|",
        f"| direct to the replica | {seq['direct']['p50']:.2f} ms | {seq['direct']['p99']:.2f} ms |",
        f"| through the gateway | {seq['gateway']['p50']:.2f} ms | {seq['gateway']['p99']:.2f} ms |",
        "",
        f"Added latency: **{seq['gateway']['p50'] - seq['direct']['p50']:.2f} ms** between the p50s, "
        f"{figures['added_p50']:.2f} ms as the median of the paired differences.",
        "",
        f"Under load (wrk, {figures['connections']} connections, {figures['rounds']} rounds of "
        f"{figures['seconds']:g} s each way, alternating; medians):",
        "",
        "| path | throughput | p50 under load | p99 under load | CPU per request |",
        "|---|---:|---:|---:|---|",
        f"| direct to the replica | {loaded['direct']['rps']:.0f} req/s | {loaded['direct']['p50']:.2f} ms | "
        f"{loaded['direct']['p99']:.2f} ms | replica {cpu['direct']['replica']:.3f} ms |",
        f"| through the gateway | {loaded['gateway']['rps']:.0f} req/s | {loaded['gateway']['p50']:.2f} ms | "
        f"{loaded['gateway']['p99']:.2f} ms | Cairn {cpu['gateway']['cairn']:.3f} ms, replica "
        f"{cpu['gateway']['replica']:.3f} ms" + (f", bridge {cpu['gateway']['bridge']:.3f} ms" if figures["sandboxed"]
                                                 else "") + " |",
        "",
        f"Throughput through the gateway: **{share:.0f}% of direct** (rounds: direct "
        + ", ".join(f"{v:.0f}" for v in figures["rounds_rps"]["direct"]) + "; gateway "
        + ", ".join(f"{v:.0f}" for v in figures["rounds_rps"]["gateway"]) + " req/s).",
    ]
    return "\n".join(lines)


def record(figures: dict, command: str) -> None:
    key = "gateway" if figures["sandboxed"] else "gateway-unsandboxed"
    write_block(section="## Serving", intro="bench/serving.py: the alibaba-genai-2026 inference load through the "
                "gateway, autoscaler vs static provisioning, and the gateway's own cost.",
                prefix="serving", key=key, block_body=report(figures, command))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000, help="sequential requests each way")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of one wrk round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--unsandboxed", action="store_true", help="CAIRN_SANDBOX=off: the gateway's replica on TCP")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    from serving import Cairn

    # Cairn's loops at their default pace (bench/serving.py quickens them for its autoscaler): in
    # embedded mode they share the gateway's process.
    env = {"CAIRN_SCHEDULER_INTERVAL": "1.0", "CAIRN_RECONCILER_INTERVAL": "1.0"}
    if args.unsandboxed:
        env["CAIRN_SANDBOX"] = "off"
    command = ".venv/bin/python bench/gateway_overhead.py" + (" --unsandboxed" if args.unsandboxed else "")
    if (args.samples, args.seconds, args.rounds, args.connections) != (2000, 10.0, 3, 8):
        command += (f" --samples {args.samples} --seconds {args.seconds:g} --rounds {args.rounds} "
                    f"--connections {args.connections}")
    with tempfile.TemporaryDirectory(prefix="cairn-bench-gateway-") as tmp:
        cairn = Cairn(Path(tmp), extra_env=env)
        try:
            figures = measure(cairn, samples=args.samples, seconds=args.seconds, rounds=args.rounds,
                              connections=args.connections)
        finally:
            cairn.stop()
    body = report(figures, command)
    print(body)
    if not args.no_record:
        record(figures, command)


if __name__ == "__main__":
    main()
