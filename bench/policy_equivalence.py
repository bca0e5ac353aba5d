"""Same decisions from two versions of the scheduling policy, on the scenarios of benchmarks a-e.

For a refactor of apps/scheduling/policy that must not change behaviour. Two ways to give the old
version:

- a whole checkout, when the policy's interface changed too (the simulator and the benchmarks
  then change with it): `mkdir /tmp/ref && git archive REV | tar -x -C /tmp/ref`, then

      python bench/policy_equivalence.py --reference-tree /tmp/ref [--only a b c d e]

  Each side runs its own checkout's policy, simulator and benchmark code (this script's scenarios
  call only what both versions have: `schedule(Snapshot(...))`, `simulate`, the benchmarks' `run`s);
- the policy alone, when only its insides changed: a package directory (`mkdir /tmp/ref && git
  archive REV apps/scheduling/policy | tar -x -C /tmp/ref`) or, from before the package, a single
  file (`git show REV:apps/scheduling/policy.py > /tmp/policy_ref.py`), then

      python bench/policy_equivalence.py --reference /tmp/ref/apps/scheduling/policy [--only a b c d e]

  (the reference is loaded as `apps.scheduling.policy`, so this checkout's simulator and
  benchmarks run on it unchanged).

Every scenario runs once per side, each in a process of its own, and the two are compared byte
for byte:

- every decision of every cycle (the cycle's `run`: admissions with their placements, waits with
  reason, estimated start, queue position and kind, preemptions with their reason);
- every gang placement asked of a pool (`Pool.place_gang`, trial placements of the preemption
  and reservation searches included; the FIFO baseline and benchmark b drive it directly);
- the figures the benchmark computes from them (wall times left out).

`--decisions-only` leaves the gang placements out of the comparison (they are digested apart): for a
change that runs fewer trial placements, or other ones, to reach the same decisions.

Scenarios (smaller than the recorded benchmarks where those take long; deterministic all):
a. bench/scheduler_throughput.py's two cycles (10,000 pending on 1,000 nodes, empty and half full);
b. bench/scheduler_placement.py's inflation for Cairn on `--placement-lists`, seed 1 (all 1,213 nodes);
c. bench/scheduler_kueue.py in full (15,000 workloads, Cairn and FIFO);
d. bench/scheduler_replay.py's `run` on `--replay-nodes` nodes, assignment `--replay-seed`, the
   first `--replay-limit` pods (0: all), Cairn and FIFO, with its defaults (anti-thrash, bounded wait);
e. bench/scheduler_fairness.py's `run` on the first `--fairness-mixes` seeds of each tuning family,
   `--fairness-pods` pods each, FIFO and every variant of `--fairness-variants` (the rule switches
   and settings a variant changes must change the same decisions on both sides; FIFO's cache is
   not read).

Prints one line per scenario and exits 1 on any difference.
"""
import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


class Recorder:
    def __init__(self):
        self.reset()

    def reset(self):
        self.digest = hashlib.sha256()
        self.placement_digest = hashlib.sha256()
        self.cycles = self.decisions = self.placements = 0
        self.kinds: Counter = Counter()

    def summary(self) -> dict:
        return {"digest": self.digest.hexdigest(), "placement_digest": self.placement_digest.hexdigest(),
                "cycles": self.cycles, "decisions": self.decisions,
                "placements": self.placements, "kinds": dict(sorted(self.kinds.items()))}


def load_reference(path: Path) -> None:
    """Install the policy at `path` (a file, or a package directory) as `apps.scheduling.policy`."""
    import apps.scheduling

    name = "apps.scheduling.policy"
    if path.is_dir():
        spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                      submodule_search_locations=[str(path)])
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    apps.scheduling.policy = module


def _cycle_class(policy):
    """The class whose `run` makes a cycle's decisions (`Cycle`; `_Cycle` before issue 43)."""
    from importlib import import_module

    cycle = import_module(policy.__name__ + ".cycle") if hasattr(policy, "__path__") else policy
    return getattr(cycle, "Cycle", None) or cycle._Cycle


def install(policy, rec: Recorder) -> None:
    cycle = _cycle_class(policy)
    pool = getattr(policy, "Pool", None) or policy._Pool  # `_Pool` before issue 43
    run = cycle.run
    place = pool.place_gang

    def recorded_run(self):
        out = run(self)
        rec.cycles += 1
        for d in out:
            rec.decisions += 1
            rec.kinds[type(d).__name__ + (f":{d.kind}" if type(d).__name__ == "Wait" else "")] += 1
            rec.digest.update(repr(d).encode())
        return out

    def recorded_place(self, shape, replicas, models):
        done = place(self, shape, replicas, models)
        rec.placements += 1
        rec.placement_digest.update(repr((self.name, shape, replicas, sorted(models) if models else None,
                                None if done is None else [(n.name, list(g)) for n, g in done])).encode())
        return done

    cycle.run = recorded_run
    pool.place_gang = recorded_place


def scenario_a(rec):
    import scheduler_throughput as a

    from apps.scheduling.policy import Admit, Preempt, Snapshot, schedule

    figures = {}
    for running in (0, 700):
        nodes, quotas, pending, holders = a.build(running=running)
        decisions = schedule(Snapshot(nodes, quotas, pending, running=holders, now=a.T0))
        figures[f"running={running}"] = {
            "admitted": sum(isinstance(d, Admit) for d in decisions),
            "replicas": sum(len(d.placement) for d in decisions if isinstance(d, Admit)),
            "preempts": sum(isinstance(d, Preempt) for d in decisions), "holders": len(holders),
        }
    return figures


def scenario_b(rec, args):
    import scheduler_placement as b

    from apps.scheduling.simulation import load_alibaba_nodes

    nodes = load_alibaba_nodes(b.TRACE_DIR / "openb_node_list_gpu_node.csv")
    figures = {}
    for name in args.placement_lists:
        tasks = b.load_tasks(name)
        counts = Counter((shape, models) for shape, models in tasks if shape[0])  # as scheduler_placement.main
        top = counts.most_common(12)
        weight = sum(c for _, c in top)
        mix = [(c / weight, shape, models) for (shape, models), c in top]
        figures[name] = b.inflate(nodes, tasks, "cairn", 1, mix)
    return figures


def scenario_c(rec):
    import scheduler_kueue as c

    from apps.scheduling.simulation import simulate

    nodes, quotas, jobs, _ = c.build()
    figures = {}
    for policy in ("cairn", "fifo"):
        result = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy=policy, grace_seconds=0.0)
        figures[policy] = {**result.as_dict(), "delays": sorted(result.delays.items())}
    return figures


def scenario_d(rec, args):
    import scheduler_replay as d

    argv = ["--nodes", str(args.replay_nodes), "--seeds", str(args.replay_seed), "--jobs", "1"]
    if args.replay_limit:
        argv += ["--limit", str(args.replay_limit)]
    out = d.run((args.replay_nodes, args.replay_seed, d.build_parser().parse_args(argv)))
    return {"pods": out["pods"], "skipped": out["skipped"],
            **{policy: {**out[policy].as_dict(), "series": out[policy].series} for policy in ("fifo", "cairn")}}


def scenario_e(rec, args):
    import scheduler_fairness as e

    e.FIFO_CACHE = Path(tempfile.mkdtemp())  # FIFO replayed by each side, not read from a cache
    figures = {}
    for family, first in e.SETS["tuning"]:
        for seed in range(first, first + args.fairness_mixes):
            out = e.run((e.mix(seed, args.fairness_pods, family), list(args.fairness_variants)))
            figures[f"{family}-{seed}"] = {k: v for k, v in out.items() if k != "wall"}
    return figures


def side(args) -> None:
    tree = Path(args.tree).resolve() if args.tree else ROOT
    sys.path[:0] = [str(tree / "bench"), str(tree)]
    if args.side == "reference" and args.reference:
        load_reference(Path(args.reference).resolve())
    import apps.scheduling.policy as policy

    rec = Recorder()
    install(policy, rec)
    results = {"policy": getattr(policy, "__file__", "")}
    scenarios = {"a": lambda: scenario_a(rec), "b": lambda: scenario_b(rec, args), "c": lambda: scenario_c(rec),
                 "d": lambda: scenario_d(rec, args), "e": lambda: scenario_e(rec, args)}
    for key in args.only:
        rec.reset()
        start = time.perf_counter()
        figures = scenarios[key]()
        results[key] = {**rec.summary(), "figures": figures, "wall": time.perf_counter() - start}
        print(f"[{args.side}] {key}: {rec.cycles} cycles, {rec.decisions} decisions, {rec.placements} placements "
              f"({results[key]['wall']:.0f} s)", file=sys.stderr, flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1, default=str, sort_keys=True))


def compare(reference: dict, current: dict, only, decisions_only: bool = False) -> bool:
    same = True
    for key in only:
        r, c = reference.get(key), current.get(key)
        if r is None or c is None:
            print(f"{key}: missing on one side")
            same = False
            continue
        compared = ("digest", "cycles", "decisions", "kinds", "figures") if decisions_only else (
            "digest", "placement_digest", "cycles", "decisions", "placements", "kinds", "figures")
        fields = [f for f in compared
                  if json.dumps(r[f], sort_keys=True) != json.dumps(c[f], sort_keys=True)]
        kinds = ", ".join(f"{k} {v}" for k, v in r["kinds"].items()) or "none"
        verdict = "identical" if not fields else "DIFFERENT in " + ", ".join(fields)
        placements = (f"{r['placements']} gang placements" if r["placements"] == c["placements"]
                      else f"{r['placements']} / {c['placements']} gang placements")
        print(f"{key}: {verdict}: {r['cycles']} cycles, {r['decisions']} decisions ({kinds}), "
              f"{placements}, digest {r['digest'][:16]}")
        same = same and not fields
    return same


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", help="the policy to compare with: a policy.py or a policy package directory")
    parser.add_argument("--reference-tree", help="the checkout to compare with (its own simulator and benchmarks)")
    parser.add_argument("--only", nargs="+", default=["a", "b", "c", "d", "e"], choices=["a", "b", "c", "d", "e"])
    parser.add_argument("--placement-lists", nargs="+", default=["default"])
    parser.add_argument("--replay-nodes", type=int, default=8)
    parser.add_argument("--replay-seed", type=int, default=0)
    parser.add_argument("--replay-limit", type=int, default=3000, help="first N pods of the list (0: all)")
    parser.add_argument("--fairness-mixes", type=int, default=1, help="e: seeds per tuning family")
    parser.add_argument("--fairness-pods", type=int, default=300, help="e: GPU pods per mix")
    parser.add_argument("--fairness-variants", nargs="+",
                        default=["cairn", "oldest-first", "no-slowdown-order", "no-starving-reclaim",
                                 "no-requeued-bound", "no-timeslice", "slice-1h", "slice-single-gpu", "strict-tiers"],
                        help="e: the variants replayed (bench/scheduler_fairness.py VARIANTS)")
    parser.add_argument("--decisions-only", action="store_true",
                        help="compare decisions and figures, not the gang placements asked on the way")
    parser.add_argument("--side", choices=["reference", "current"], help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)  # with --side: the checkout it runs
    parser.add_argument("--out", help="with --side: where to write its results (JSON)")
    parser.add_argument("--compare", nargs=2, metavar=("REFERENCE_JSON", "CURRENT_JSON"),
                        help="compare two results written by --side ... --out")
    args = parser.parse_args()
    if args.side:
        side(args)
        return
    if args.compare:
        results = [json.loads(Path(p).read_text()) for p in args.compare]
    else:
        if not args.reference and not args.reference_tree:
            parser.error("--reference or --reference-tree is required")
        results = []
        with tempfile.TemporaryDirectory() as tmp:
            for which in ("reference", "current"):
                out = Path(tmp) / f"{which}.json"
                tree = ["--tree", args.reference_tree] if which == "reference" and args.reference_tree else []
                subprocess.run([sys.executable, __file__, *sys.argv[1:], "--side", which, "--out", str(out), *tree],
                               check=True)
                results.append(json.loads(out.read_text()))
    sys.exit(0 if compare(results[0], results[1], args.only, args.decisions_only) else 1)


if __name__ == "__main__":
    main()
