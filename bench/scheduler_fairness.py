"""Benchmark e: fairness against strict FIFO over many task mixes, judged on distributions.

Benchmark d replays one task list (the trace's `default`) under five assignments of pods to
projects: a policy tuned on it can meet the target there and miss on another list of the same
trace. This one replays many mixes derived from the public lists, each drawn from a seed:

- pods: `--pods` GPU pods sampled (without replacement) from one list or an equal mix of two or
  three of `default`, `gpuspec33` and `multigpu50`; each keeps its resources, GPU-model
  constraint and duration, and its arrival (creation time) scaled by pods / 8,000 so that the
  arrival rate is about that of a whole list (the load of benchmark d at the same node count);
  multigpu50 has no times: its pods take those of the same pod in default, and its 909 added
  multi-GPU pods those of a multi-GPU pod of default;
- priority classes: the trace's (qos), or shares drawn at random (P1 Guaranteed at most 10%, as it
  is never preemptible; P2 LS, P3 Burstable, P4 BE);
- projects: 4, 6, 8 or 12, pods assigned by a seeded hash, evenly or skewed (project i drawn with
  weight 1 / (i+1)^s, s 0.5 or 1), each with an equal nominal share, borrowing allowed;
- nodes: an even sample of 5 to 10 of the trace's nodes.

Each mix is replayed under strict FIFO and under Cairn (each `--variant`), pods' run times unknown
to the policy, grace period 30 s, preempted pods checkpointing at SIGTERM, the service's defaults
(anti-thrash, bounded wait, GPU-node reserve). A mix is overloaded when the queue forms: FIFO's
average wait is over an hour (as on every sample of benchmark d). For each variant the script reports, over
the mixes (all, and the overloaded ones), the distribution (min, p10, median) of Cairn - FIFO on
both fairness indexes, of Cairn / FIFO utilisation and of FIFO / Cairn average wait.

    python bench/scheduler_fairness.py [--mixes 40] [--first-seed 0] [--pods 1500] [--jobs 2]
                                       [--variant cairn ...] [--no-record]
"""
import argparse
import csv
import hashlib
import json
import os
import random
import statistics
import time
from multiprocessing import Pool

from scheduler_common import ROOT, TRACE_DIR, command_line, machine, record, setup_path

setup_path()
from apps.scheduling.policy import _Cycle  # noqa: E402
from apps.scheduling.simulation import (  # noqa: E402
    QOS_PRIORITY,
    SimJob,
    alibaba_task_resources,
    equal_quotas,
    load_alibaba_nodes,
    simulate,
)

LISTS = ("default", "gpuspec33", "multigpu50")
COMBOS = [("default",), ("gpuspec33",), ("multigpu50",), ("default", "gpuspec33"), ("default", "multigpu50"),
          ("gpuspec33", "multigpu50"), LISTS]
# Policy variants: class attributes of the policy set in the worker before the replay (the
# attributes the variant names must exist: a typo fails), or "simulate.<argument>" for the replay.
VARIANTS: dict[str, dict[str, object]] = {
    "cairn": {},
    "oldest-first": {"_Cycle.YOUNGEST_FIRST": False},
    "no-slowdown-order": {"_Cycle.SLOWDOWN_ORDER": False},
    "no-starving-reclaim": {"_Cycle.STARVING_RECLAIM": False},
    "no-requeued-bound": {"_Cycle.REQUEUED_BOUND": False},
    # Issue 31's fourth round undone (the policy recorded before it): no time slice.
    "no-timeslice": {"_Cycle.TIMESLICE": False},
    "slice-1h": {"simulate.timeslice_seconds": 3600.0},
    "slice-12h": {"simulate.timeslice_seconds": 12 * 3600.0},
    "slice-single-gpu": {"_Cycle.TIMESLICE_MIN_GPU": 1},  # single-GPU work slices too
    "slice-4-gpus": {"_Cycle.TIMESLICE_MIN_GPU": 4000},
    # Issue 31 (third round) undone: reservations drain the oldest work first, work past the bounded
    # wait ordered by priority and share, no reclaim for it, requeued work never past the bound.
    "before": {"_Cycle.YOUNGEST_FIRST": False, "_Cycle.SLOWDOWN_ORDER": False, "_Cycle.STARVING_RECLAIM": False,
               "_Cycle.REQUEUED_BOUND": False, "_Cycle.TIMESLICE": False},
    # The ordering before issue 31: work past the bounded wait keeps the nominal-before-borrowing tiers.
    "strict-tiers": {"_Cycle.STARVING_BELOW_NOMINAL": False},
}
_PODS: dict[str, list[dict]] = {}
# FIFO's figures per mix and code version (see fifo_key): FIFO is the same for every variant.
OVERLOADED_WAIT = 3600.0
JOBS_VERSION = "2"  # bump when mix() or jobs_of() change what a seed replays, or what a run keeps (FIFO's cache is keyed on it)
# The rules of the bounded wait (docs/scheduling.md) were chosen on seeds 0-99 (the first of them on
# 0-29): later seeds are held out.
HELD_OUT_FROM = 100
FIFO_CACHE = ROOT / "var" / "bench-fairness-fifo"


TIMING = ("qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


def _rows(name: str) -> list[dict]:
    with open(TRACE_DIR / f"openb_pod_list_{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def pods_of(name: str) -> list[dict]:
    """The GPU pods of a list that ran in the trace (as load_alibaba_tasks keeps them).

    multigpu50 has shapes only (no qos or times): it is the default list's pods plus 909 multi-GPU
    ones. Its pods of the default list keep their qos and times there; each added pod takes those
    of a multi-GPU pod of the default list, chosen by a hash of its name."""
    if name not in _PODS:
        rows = _rows(name)
        if name == "multigpu50":
            default = {row["name"]: row for row in _rows("default")}
            donors = [row for row in default.values() if int(row["num_gpu"]) > 1 and row.get("deletion_time")
                      and row.get("scheduled_time", "") != ""]
            for row in rows:
                donor = default.get(row["name"]) or donors[
                    int(hashlib.sha1(row["name"].encode()).hexdigest(), 16) % len(donors)]
                row.update({k: donor.get(k, "") for k in TIMING})
                row["gpu_spec"] = default[row["name"]].get("gpu_spec", "") if row["name"] in default else ""
        rows = [row for row in rows
                if row.get("deletion_time") and row.get("creation_time") and row.get("scheduled_time", "0") != ""]
        _PODS[name] = [row for row in rows if alibaba_task_resources(row).gpu_milli]
    return _PODS[name]


def mix(seed: int, pods: int) -> dict:
    """The mix of one seed: its lists, pods, priorities, projects and node sample."""
    rng = random.Random(seed)
    combo = COMBOS[rng.randrange(len(COMBOS))]
    nodes = rng.randint(5, 10)
    projects = rng.choice([4, 6, 8, 12])
    skew = rng.choice([0.0, 0.0, 0.5, 1.0])
    if rng.random() < 0.5:
        shares = None  # the trace's qos
    else:
        p1 = rng.uniform(0, 0.1)
        rest = [rng.random() for _ in range(3)]
        shares = [p1] + [(1 - p1) * x / sum(rest) for x in rest]
    return {"seed": seed, "lists": combo, "nodes": nodes, "projects": projects, "skew": skew, "shares": shares,
            "pods": pods}


def jobs_of(m: dict) -> list[SimJob]:
    rng = random.Random(f"pods:{m['seed']}")
    per_list = [m["pods"] // len(m["lists"]) + (i < m["pods"] % len(m["lists"])) for i in range(len(m["lists"]))]
    scale = m["pods"] / 8000
    weights = [1 / (i + 1) ** m["skew"] for i in range(m["projects"])]
    total = sum(weights)
    cumulative = [sum(weights[:i + 1]) / total for i in range(m["projects"])]
    jobs = []
    for name, count in zip(m["lists"], per_list, strict=True):
        for row in rng.sample(pods_of(name), count):
            created = float(row["creation_time"])
            if m["shares"] is None:
                qos = row.get("qos") or "LS"
                priority = QOS_PRIORITY.get(qos, 3)
            else:
                priority = 1 + rng.choices(range(4), weights=m["shares"])[0]
            # The pod's project: a seeded hash of its list and name, through the skewed weights.
            h = int(hashlib.sha1(f"{m['seed']}:{name}:{row['name']}".encode()).hexdigest(), 16) % 10**9 / 10**9
            project = next(i for i, c in enumerate(cumulative) if h < c or i == m["projects"] - 1)
            jobs.append(SimJob(
                id=len(jobs) + 1, project=f"project-{project:02d}", arrival=created * scale,
                duration=max(1.0, float(row["deletion_time"]) - created), per_replica=alibaba_task_resources(row),
                priority=priority, gpu_model=row.get("gpu_spec") or "", preemptible=priority != 1,
            ))
    return jobs


def placeable(job, nodes) -> bool:
    models = set(job.gpu_model.split("|")) if job.gpu_model else None
    return any(job.per_replica.fits_in(n.allocatable) and (models is None or n.gpu_model in models) for n in nodes)


def _apply(variant: str) -> dict:
    """Set a variant's class attributes; returns the previous values."""
    before = {}
    for path, value in VARIANTS[variant].items():
        cls_name, attr = path.split(".")
        if cls_name == "simulate":
            continue
        cls = {"_Cycle": _Cycle}[cls_name]
        if not hasattr(cls, attr):
            raise AttributeError(f"variant {variant}: {path} does not exist")
        before[path] = getattr(cls, attr)
        setattr(cls, attr, value)
    return before


def _arguments(variant: str) -> dict:
    """A variant's arguments for simulate() (FIFO's: none)."""
    return {path.split(".")[1]: value for path, value in VARIANTS.get(variant, {}).items()
            if path.startswith("simulate.")}


def _restore(before: dict) -> None:
    for path, value in before.items():
        setattr(_Cycle, path.split(".")[1], value)


def run(task: tuple[dict, list[str]]) -> dict:
    m, variants = task
    nodes = load_alibaba_nodes(TRACE_DIR / "openb_node_list_gpu_node.csv", limit=m["nodes"])
    jobs = [j for j in jobs_of(m) if placeable(j, nodes)]
    quotas = equal_quotas(nodes, {f"project-{i:02d}" for i in range(m["projects"])})
    capacity = sum(n.allocatable.gpu_milli for n in nodes) / 1000
    out = {"mix": m, "pods": len(jobs), "load": offered_load(jobs, capacity), "gpus": capacity, "wall": {}}
    cached = FIFO_CACHE / f"{fifo_key(m)}.json"
    if cached.exists():
        out["fifo"] = json.loads(cached.read_text())
        out["wall"]["fifo"] = 0.0
    for policy in ["fifo", *variants]:
        if policy in out:
            continue
        start = time.perf_counter()
        before = _apply(policy) if policy != "fifo" else {}
        try:
            r = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="fifo" if policy == "fifo" else "cairn",
                         known_durations=False, **_arguments(policy))
        finally:
            _restore(before)
        out[policy] = {"utilisation": r.utilisation, "wait": r.avg_queue_delay, "slowdown": r.fairness,
                       "share": r.share_fairness, "preemptions": r.preemptions, "unfinished": r.unfinished,
                       "projects": r.project_service}
        out["wall"][policy] = time.perf_counter() - start
        if policy == "fifo":
            FIFO_CACHE.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(out["fifo"]))
    return out


def fifo_key(m: dict) -> str:
    """FIFO's figures on a mix depend on the mix, on how the bench builds its pods (JOBS_VERSION) and on
    the code FIFO runs: the simulator and the policy's state, quota and placement (not its ordering,
    preemption or backfill, which FIFO does not use). A key for all of them, so variants reuse FIFO."""
    code = hashlib.sha256(JOBS_VERSION.encode())
    policy = ROOT / "apps" / "scheduling" / "policy"
    for path in [ROOT / "apps" / "scheduling" / "simulation.py",
                 *(policy / f"{name}.py" for name in ("snapshot", "quota", "placement", "state"))]:
        code.update(path.read_bytes())
    return hashlib.sha256(json.dumps(m, sort_keys=True).encode() + code.digest()).hexdigest()[:24]


def offered_load(jobs: list[SimJob], capacity: float) -> float:
    """The GPUs the pods would hold if each started on arrival, averaged over the arrival window, per
    GPU of the sample (above 1: no policy can keep the queue from growing)."""
    start, end = min(j.arrival for j in jobs), max(j.arrival for j in jobs)
    held = sum(j.per_replica.gpu_milli / 1000 * j.replicas * max(0.0, min(j.arrival + j.duration, end) - j.arrival)
               for j in jobs)
    return held / (capacity * (end - start)) if end > start else float("inf")


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank below) of values."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(q * len(ordered)) - (q * len(ordered) == int(q * len(ordered)))))] \
        if q > 0 else ordered[0]


def figures(runs: list[dict], variant: str) -> dict:
    def diff(key):
        return [r[variant][key] - r["fifo"][key] for r in runs]
    util = [r[variant]["utilisation"] / r["fifo"]["utilisation"] if r["fifo"]["utilisation"] else float("inf")
            for r in runs]
    wait = [r["fifo"]["wait"] / r[variant]["wait"] if r[variant]["wait"] else float("inf") for r in runs]
    # Per project, the ratio the slowdown index is taken over (GPU-time used / GPU-time in the system):
    # the worst-off project's against FIFO's worst-off, and how many projects fare at least as well.
    worst = [min(r[variant]["projects"].values()) / min(r["fifo"]["projects"].values())
             if min(r["fifo"]["projects"].values()) else float("inf") for r in runs]
    better = [sum(r[variant]["projects"][p] >= r["fifo"]["projects"][p] for p in r["fifo"]["projects"])
              / len(r["fifo"]["projects"]) for r in runs]
    return {"slowdown": diff("slowdown"), "share": diff("share"), "util": util, "wait": wait, "worst": worst,
            "better": better}


def stats(values: list[float]) -> tuple[float, float, float]:
    return min(values), pct(values, 0.10), statistics.median(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mixes", type=int, default=40)
    parser.add_argument("--first-seed", type=int, default=0, help="mixes are seeds first-seed .. first-seed+mixes-1")
    parser.add_argument("--pods", type=int, default=1500, help="GPU pods per mix")
    parser.add_argument("--variant", nargs="+", default=["cairn"], choices=sorted(VARIANTS))
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs at once (at most 2)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    mixes = [mix(seed, args.pods) for seed in range(args.first_seed, args.first_seed + args.mixes)]
    start = time.perf_counter()
    tasks = [(m, args.variant) for m in mixes]
    runs = []
    with Pool(max(1, min(args.jobs, 2))) as workers:
        for r in workers.imap_unordered(run, tasks):
            runs.append(r)
            m = r["mix"]
            print(f"seed {m['seed']:3d} {'+'.join(m['lists']):34s} {m['nodes']:2d} nodes {m['projects']:2d} projects "
                  f"skew {m['skew']:.1f} {'qos' if m['shares'] is None else 'drawn':5s} load {r['load']:5.1f}  "
                  + "  ".join(f"{p}: slowdown {r[p]['slowdown']:.3f} share {r[p]['share']:.3f} "
                              f"util {r[p]['utilisation']:.1%} wait {r[p]['wait']:,.0f}"
                              for p in ["fifo", *args.variant]), flush=True)
    runs.sort(key=lambda r: r["mix"]["seed"])
    wall = time.perf_counter() - start
    cpu = sum(sum(r["wall"].values()) for r in runs)
    overloaded = [r for r in runs if r["fifo"]["wait"] > OVERLOADED_WAIT]
    lines = [
        "### e. Fairness over many task mixes: Cairn vs strict FIFO",
        "",
        f"`{command_line()}` ({machine()}; {len(runs)} mixes, seeds {args.first_seed}-{args.first_seed + args.mixes - 1}, "
        f"{args.pods:,} pods each; {cpu / 60:.0f} CPU-minutes, {wall / 60:.0f} minutes on {min(args.jobs, 2)} workers). "
        "Each mix: GPU pods sampled from one list or an equal mix of two or three of default / gpuspec33 / "
        "multigpu50 (arrivals scaled to a whole list's rate), the trace's priority classes or shares drawn at "
        "random, 4-12 projects with equal nominal quotas and pods assigned evenly or skewed, on an even sample "
        "of 5-10 of the trace's nodes; pods' run times unknown to the policy, the service's defaults. "
        f"Overloaded: the queue forms, FIFO's average wait is over an hour ({len(overloaded)} of {len(runs)}); "
        "'load' is the GPUs the pods would hold if each started on arrival, over the arrival window, per GPU.",
        "",
        "| variant | mixes | fairness slowdown, Cairn - FIFO (min / p10 / median) | fairness share, Cairn - FIFO "
        "(min / p10 / median) | utilisation, Cairn / FIFO (min / p10 / median) | average wait, FIFO / Cairn "
        "(min / p10 / median) |",
        "|---|---|---|---|---|---|",
    ]
    subsets = [("all", runs), ("overloaded", overloaded)]
    if args.first_seed < HELD_OUT_FROM < args.first_seed + args.mixes:
        subsets += [(f"overloaded, seeds {args.first_seed}-{HELD_OUT_FROM - 1}",
                     [r for r in overloaded if r["mix"]["seed"] < HELD_OUT_FROM]),
                    (f"overloaded, held out (seeds {HELD_OUT_FROM}+)",
                     [r for r in overloaded if r["mix"]["seed"] >= HELD_OUT_FROM])]
    per_project = []
    for variant in args.variant:
        for label, subset in subsets:
            if not subset:
                continue
            f = figures(subset, variant)
            s, h, u, w, wo, b = (stats(f[k]) for k in ("slowdown", "share", "util", "wait", "worst", "better"))
            below = sum(d < 0 for d in f["slowdown"])
            lines.append(
                f"| {variant} | {label} ({len(subset)}) | {s[0]:+.4f} / {s[1]:+.4f} / {s[2]:+.4f} ({below} below) | "
                f"{h[0]:+.4f} / {h[1]:+.4f} / {h[2]:+.4f} | {u[0]:.2f}x / {u[1]:.2f}x / {u[2]:.2f}x | "
                f"{w[0]:,.1f}x / {w[1]:,.1f}x / {w[2]:,.1f}x |")
            per_project.append(f"| {variant} | {label} ({len(subset)}) | {wo[0]:.2f}x / {wo[1]:.2f}x / {wo[2]:.2f}x | "
                               f"{b[0]:.0%} / {b[1]:.0%} / {b[2]:.0%} |")
    lines += ["", "Per project, the ratio the slowdown index is taken over (GPU-time used / GPU-time its pods spent "
              "in the system): the worst-off project's ratio under Cairn against the worst-off project's under FIFO, "
              "and the share of a mix's projects whose ratio is at least FIFO's:", "",
              "| variant | mixes | worst-off project, Cairn / FIFO (min / p10 / median) | projects served at least "
              "as well as under FIFO (min / p10 / median) |", "|---|---|---|---|", *per_project]
    lines += ["", "Every mix (FIFO, then each variant: slowdown index, share index, utilisation, average wait):", "",
              "| seed | lists | nodes | projects | skew | classes | pods | load | FIFO | "
              + " | ".join(args.variant) + " |",
              "|---|---|---|---|---|---|---|---|---|" + "---|" * len(args.variant)]
    for r in runs:
        m = r["mix"]
        cells = [f"{r[p]['slowdown']:.3f}, {r[p]['share']:.3f}, {r[p]['utilisation']:.1%}, {r[p]['wait']:,.0f} s"
                 for p in ["fifo", *args.variant]]
        lines.append(f"| {m['seed']} | {' + '.join(m['lists'])} | {m['nodes']} | {m['projects']} | {m['skew']:g} | "
                     f"{'trace' if m['shares'] is None else 'drawn'} | {r['pods']:,} | {r['load']:.1f} | "
                     + " | ".join(cells) + " |")
    print("\n".join(lines[:lines.index("Every mix (FIFO, then each variant: slowdown index, share index, utilisation, "
                                        "average wait):")]))
    if not args.no_record:
        record("e", "\n".join(lines))


if __name__ == "__main__":
    main()
