"""The autoscaler's decision function alone, replayed on bench/serving.py's load (no server, no
replicas): what replica-seconds its rules give for a given request latency, in a second.

    .venv/bin/python bench/autoscaler_model.py [--latency-ms 35 45] [--seconds 60] [--peak-rps 40]

The arrivals are bench/serving.py's (the alibaba-genai-2026 trace, compressed and scaled the same
way, the same seed). The gateway's `serve.concurrency` sample every 2 s is modelled as the
requests that arrived in the interval times the latency, over the interval (Little's law); the
policy is bench/serving.py's (target 1 in flight per replica, stable 6 s, panic 1 s, 1 to
`static peak` replicas). apps.deployments.autoscaler.decide runs every 0.5 s, as the scheduler's
cycle does there, and each decision applies at once (no start-up time: a lower bound of what the
real run uses). Static peak provisioning is the baseline, computed in the same run.

It isolates the decision rules from the machine's load: in bench/serving.py the latency (hence
the concurrency the autoscaler sees) depends on how busy the 2 CPUs are.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from apps.deployments.autoscaler import Policy, Sample, State, decide  # noqa: E402 - pure, no Django needed

INTERVAL = 2.0  # the gateway's metrics interval (SERVE_METRICS_INTERVAL_SECONDS)
TICK = 0.5  # the autoscaler runs with each scheduling cycle (CAIRN_SCHEDULER_INTERVAL in bench/serving.py)


def serving_bench():
    spec = importlib.util.spec_from_file_location("serving_bench", ROOT / "bench" / "serving.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay(times: list[float], *, seconds: float, latency: float, policy: Policy) -> tuple[float, int]:
    """Replica-seconds and scale changes over the replay."""
    samples: list[Sample] = []
    current, state, replica_seconds, changes = policy.min_replicas, State(), 0.0, 0
    arrivals = sorted(times)
    i, now = 0, 0.0
    next_sample = INTERVAL
    while now < seconds:
        now += TICK
        if now >= next_sample - 1e-9:
            start, count = next_sample - INTERVAL, 0
            while i < len(arrivals) and arrivals[i] <= next_sample:
                count += arrivals[i] > start
                i += 1
            samples.append(Sample(time=next_sample, source="gw", value=count * latency / INTERVAL))
            next_sample += INTERVAL
        window = [s for s in samples if s.time > now - policy.stable_window]
        decision = decide(policy, now=now, current=current, samples=window, state=state)
        replica_seconds += TICK * current
        changes += decision.desired != current
        state, current = decision.state, decision.desired
    return replica_seconds, changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--peak-rps", type=float, default=40.0)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[30.0, 35.0, 40.0, 45.0])
    args = parser.parse_args()
    bench = serving_bench()
    times = bench.arrivals(bench.load_trace(), seconds=args.seconds, peak_rps=args.peak_rps)
    peak = math.ceil(args.peak_rps / (1000 / bench.WORK_MS * 0.6))  # bench/serving.py's static peak
    policy = Policy(min_replicas=1, max_replicas=peak, target=1.0, stable_window=6, panic_window=1)
    static = peak * args.seconds
    print(f"{len(times)} requests in {args.seconds:g} s; static peak {peak} replicas = {static:.0f} replica-seconds")
    print("| latency | replica-seconds | vs static peak | scale changes |")
    print("|---:|---:|---:|---:|")
    for latency in args.latency_ms:
        used, changes = replay(times, seconds=args.seconds, latency=latency / 1000, policy=policy)
        print(f"| {latency:g} ms | {used:.0f} | {used / static * 100:.0f}% | {changes} |")


if __name__ == "__main__":
    main()
