"""Benchmark b: placement quality, the "workload inflation" experiment of the FGD paper
(Weng et al., USENIX ATC'23) on alibaba-gpu-2023.

Tasks are sampled (with replacement, fixed seeds) from a trace task list and submitted one at a
time to the 1,213-node, 6,212-GPU cluster; a task that fits nowhere is dropped and the next one
comes, until no GPU task of the list fits anywhere. We report the share of the GPUs allocated
when the GPUs asked for reach 100% and 130% of the cluster's (the paper's x-axis) and at that end,
for Cairn's placement and, in the same run, for best-fit, worst-fit, dot-product and random
placement implemented here.

Cairn's placement is the policy core's own (`apps.scheduling.policy.Pool`: best-fit buckets,
per-GPU milli accounting, candidates scored by the fragmentation they add for the task mix);
it is driven directly rather than through `schedule()` so that each of the ~10,000 submissions
does not rebuild the cluster state.

Cairn runs with the service's GPU-node reserve (`CAIRN_GPU_NODE_RESERVE`, docs/scheduling.md): on a
node with free GPUs, CPU-only tasks may not take the CPU and memory those GPUs need. Rows without
it and with a full reserve, and best-fit given the same reserve, show what part of the result is
the reserve and what part the placement score.

    python bench/scheduler_placement.py [--seeds 3] [--lists default gpuspec33] [--jobs 2] [--no-record]
"""
import argparse
import csv
import math
import random
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from scheduler_common import TRACE_DIR, command_line, machine, median, record, setup_path

setup_path()
from apps.scheduling.policy import (  # noqa: E402
    DEFAULT_GPU_NODE_RESERVE,
    GPU,
    NodeState,
    PolicyOptions,
    Pool,
    kept_for_gpus,
)

_DEFAULT = PolicyOptions()
from apps.scheduling.simulation import alibaba_task_resources, load_alibaba_nodes  # noqa: E402

STOP_AT = 1.3


def load_tasks(name: str) -> list[tuple[tuple[int, int, int], frozenset | None]]:
    with open(TRACE_DIR / f"openb_pod_list_{name}.csv", newline="") as f:
        out = []
        for row in csv.DictReader(f):
            r = alibaba_task_resources(row)
            spec = row.get("gpu_spec") or ""
            out.append((r.as_tuple(), frozenset(spec.split("|")) if spec else None))
        return out


class FreeCapacity:
    """Free GPU milli per GPU, CPU and memory per node: the state every bench placement keeps."""

    def __init__(self, nodes: list[NodeState]):
        self.model = [n.gpu_model for n in nodes]
        self.gpus = [[GPU] * (n.allocatable.gpu_milli // GPU) for n in nodes]
        self.cpu = [n.allocatable.cpu_milli for n in nodes]
        self.mem = [n.allocatable.memory_mb for n in nodes]

    def take(self, i, gpus, shape):
        g, c, m = shape
        for k in gpus:
            self.gpus[i][k] -= g if g < GPU else GPU
        self.cpu[i] -= c
        self.mem[i] -= m


class Baseline(FreeCapacity):
    """Whole-cluster scan placements: each returns (node index, gpu indices) or None."""

    def __init__(self, nodes: list[NodeState], kind: str, rng: random.Random, reserve: float = 0.0):
        self.kind = kind
        self.rng = rng
        self.reserve = reserve
        super().__init__(nodes)
        self.cap = [(max(n.allocatable.gpu_milli, 1), n.allocatable.cpu_milli, n.allocatable.memory_mb) for n in nodes]

    def _reserved(self, i, c, m) -> bool:
        """Would a CPU-only task take CPU or memory that node i keeps for its free GPUs?"""
        cg, cc, cm = self.cap[i]
        keep_cpu, keep_mem = kept_for_gpus(self.reserve, sum(self.gpus[i]), cg, cc, cm)
        return self.cpu[i] - c < keep_cpu or self.mem[i] - m < keep_mem

    def _gpus_for(self, i, g):
        free = self.gpus[i]
        if g == 0:
            return []
        if g >= GPU:
            whole = [k for k, x in enumerate(free) if x == GPU]
            k = -(-g // GPU)
            return whole[:k] if len(whole) >= k else None
        fits = [k for k, x in enumerate(free) if x >= g]
        if not fits:
            return None
        return [min(fits, key=lambda k: free[k])] if self.kind != "worst" else [max(fits, key=lambda k: free[k])]

    def place(self, shape, models):
        g, c, m = shape
        best = None
        feasible = []
        for i in range(len(self.gpus)):
            if c > self.cpu[i] or m > self.mem[i] or (models is not None and self.model[i] not in models):
                continue
            if g == 0 and self.reserve and self._reserved(i, c, m):
                continue
            gpus = self._gpus_for(i, g)
            if gpus is None:
                continue
            if self.kind == "random":
                feasible.append((i, gpus))
                continue
            cg, cc, cm = self.cap[i]
            free_g = sum(self.gpus[i])
            if self.kind in ("best", "worst"):
                # remaining share of the node's resources after placing (GPU and CPU weighted equally)
                score = (free_g - g) / cg + (self.cpu[i] - c) / cc
                if self.kind == "worst":
                    score = -score
            else:  # dot-product (Tetris): alignment of the request with the free vector, largest wins
                score = -((g / cg) * (free_g / cg) + (c / cc) * (self.cpu[i] / cc) + (m / cm) * (self.mem[i] / cm))
            if best is None or score < best[0]:
                best = (score, i, gpus)
        if self.kind == "random":
            return self.rng.choice(feasible) if feasible else None
        return None if best is None else (best[1], best[2])



class PaperFGD(FreeCapacity):
    """FGD as its authors' simulator implements it (kubernetes-scheduler-simulator, the code behind
    the ATC'23 paper), re-implemented here over the same node and task model as the other
    placements, to check Cairn's score and this harness against the reference:

    - target workload ("typical pods"): the trace's GPU task types (CPU, GPU milli per GPU, GPU
      count, GPU model spec), most popular first, taken 10 types at a time until they cover >= 60%
      of the GPU tasks, frequencies renormalised;
    - a node's fragmentation for a task type: the free GPU milli of its GPUs with less free than
      the type needs per GPU, when the type fits (GPUs and CPU; memory is not part of the paper's
      model); all its free GPU milli when the type cannot run there (model, GPUs or CPU);
      node fragmentation = sum over types of frequency x that;
    - score = int(100 x sigmoid((fragmentation before - after) / 1000)); the highest wins, ties
      at random (kube-scheduler's host selection) or, with `first`, the first such node in the
      node list; a fractional task takes the GPU with the best score, a whole-GPU task the first
      free GPUs.
    """

    THRESHOLD = 0.6

    def __init__(self, nodes: list[NodeState], tasks, rng: random.Random, first: bool = False):
        self.rng = rng
        self.first = first
        super().__init__(nodes)
        counts = Counter(self.task_type(shape, models) for shape, models in tasks if shape[0])
        ranked = counts.most_common()
        total = sum(counts.values())
        taken, covered = 0, 0
        while covered < self.THRESHOLD * total and taken < len(ranked):
            covered += sum(count for _, count in ranked[taken:taken + 10])
            taken = min(taken + 10, len(ranked))
        self.typical = [(count / covered, kind) for kind, count in ranked[:taken]]
        self._frag: dict[tuple, float] = {}
        self._score: dict[tuple, tuple[int, list[int]] | None] = {}
        self._node_cache: list[dict] = [{} for _ in nodes]

    @staticmethod
    def task_type(shape, models):
        g, c, _ = shape
        per_gpu, count = (g, 1) if 0 < g < GPU else (GPU, g // GPU) if g else (0, 0)
        return (c, per_gpu, count, models)

    def frag(self, gpus: tuple[int, ...], cpu: int, model: str) -> float:
        key = (gpus, cpu, model)
        value = self._frag.get(key)
        if value is None:
            free = sum(gpus)
            value = 0.0
            for freq, (c, per_gpu, count, models) in self.typical:
                if (models is not None and model not in models) or cpu < c or sum(
                        1 for x in gpus if x >= per_gpu) < count:
                    value += freq * free
                else:
                    value += freq * sum(x for x in gpus if x < per_gpu)
            self._frag[key] = value
        return value

    def _node_score(self, i: int, shape, models):
        g, c, m = shape
        if c > self.cpu[i] or m > self.mem[i] or (models is not None and self.model[i] not in models):
            return None
        gpus, cpu, model = tuple(self.gpus[i]), self.cpu[i], self.model[i]
        key = (gpus, cpu, self.mem[i] >= m, model, shape, models)
        if key in self._score:
            return self._score[key]
        before = self.frag(gpus, cpu, model)
        best = None
        if 0 < g < GPU:
            for k, x in enumerate(gpus):
                if x >= g:
                    after = self.frag(gpus[:k] + (x - g,) + gpus[k + 1:], cpu - c, model)
                    score = int(100 / (1 + math.exp(-(before - after) / 1000)))
                    if best is None or score > best[0]:
                        best = (score, [k])
        else:
            need = g // GPU
            free = [k for k, x in enumerate(gpus) if x == GPU][:need]
            if len(free) == need:
                after_gpus = tuple(0 if k in free else x for k, x in enumerate(gpus))
                after = self.frag(after_gpus, cpu - c, model)
                best = (int(100 / (1 + math.exp(-(before - after) / 1000))), free)
        self._score[key] = best
        return best

    def place(self, shape, models):
        top, chosen = None, []
        for i in range(len(self.gpus)):
            found = self._node_score(i, shape, models)
            if found is None:
                continue
            if top is None or found[0] > top:
                top, chosen = found[0], [(i, found[1])]
            elif found[0] == top:
                chosen.append((i, found[1]))
        if not chosen:
            return None
        return chosen[0] if self.first else self.rng.choice(chosen)



class PaperBestFit(Baseline):
    """The FGD paper's best-fit baseline: least free CPU and GPU left after placing, each scaled by
    the largest node spec (128 CPUs, 8 GPUs) and weighted 0.5, as an integer score 0-100, ties at
    random; our "best-fit" above scales by each node's own capacity instead."""

    def place(self, shape, models):
        g, c, m = shape
        top, chosen = None, []
        for i in range(len(self.gpus)):
            if c > self.cpu[i] or m > self.mem[i] or (models is not None and self.model[i] not in models):
                continue
            gpus = self._gpus_for(i, g)
            if gpus is None:
                continue
            left = 0.5 * (self.cpu[i] - c) / 128000 + 0.5 * (sum(self.gpus[i]) - g) / 8000
            score = int((1 - left) * 100)
            if top is None or score > top:
                top, chosen = score, [(i, gpus)]
            elif score == top:
                chosen.append((i, gpus))
        return self.rng.choice(chosen) if chosen else None


FINDINGS = (
    "What the figures say. Cairn's score is FGD's fragmentation measure (per-GPU milli; a node's fragmentation "
    "for a task type is the free milli of the GPUs with less free than the type needs per GPU when the type fits, all "
    "its free milli when it cannot run there for CPU, memory, GPUs or GPU model; weighted by the most frequent shapes "
    "and their allowed models) plus the GPU milli a placement leaves stranded, scored over the 12 best-fit "
    "candidates per replica rather than every node (scoring every node was measured worse here). The rules beyond "
    "FGD's measure come from the end states, where CPU, not GPU, runs out first: in the trace's lists 13% of the "
    "tasks are CPU-only (17.6 CPUs each on average), there are no CPU-only nodes, and GPU tasks ask about 11 CPUs per "
    "GPU where the 549 8-GPU G2 nodes have 12 and the 387 T4 nodes 52.\n\n"
    "- Stranded GPUs (`--stranded`, the weight of the free GPU milli a node's CPU and memory can no longer serve at "
    "the mix's average CPU and memory per GPU, against the fragmentation measure). Without it gpuspec33 ended at "
    "96.8%: of the 198 GPUs left (seed 1), 139 were on 447 of the G2 nodes as fractions of a GPU, their 96 CPUs down "
    "to 0-4 free, because CPU-heavy fractional tasks (0.47 GPU with 12 CPUs) had drained them while the T4 nodes "
    "had CPU to spare; fragmentation sees a GPU as lost only once no shape of the mix fits beside it. Same machine, 3 "
    "seeds, default / gpuspec33 / multigpu50 at the end: weight 0 97.8% / 96.8% / 98.8%, 4 98.2% / 97.2% / 99.0%, "
    "8 and 16 98.2% / 97.3% / 99.0%, 2 (the policy's) as in the table. Benchmark b cannot tell 2 from 16; "
    "benchmark d's fairness swings with the weight on its small samples and was best at 2 (its text).\n"
    "- 12 candidates (`--candidates`): with the stranded score, 6 candidates ended at 98.1% / 97.1% / 98.9% and 24 "
    "as the table's 12; against 6, 12 made benchmark a's cycle about 30% longer on the empty cluster and no "
    "longer on the half-full one, 24 about 70% and 35% longer. "
    "Without the stranded score 6 and 12 ended alike (gpuspec33 96.8%).\n"
    "- The GPU-node reserve (CPU-only work may not take the CPU and memory a node's free GPUs need; the rows 'no "
    "GPU-node reserve' and 'best-fit with a ... reserve' separate its effect; it costs almost no CPU, the 'CPU at the "
    "end' column). The default stays at 0.5 so that CPU-only work can still use half of an idle GPU node; an "
    "operator whose GPU work is mostly waiting can set 1 (`CAIRN_GPU_NODE_RESERVE`; the 'GPU-node reserve 100%' rows).\n"
    "- Balanced GPU placement (`--balance`: GPU work prefers candidates where it leaves the other free GPUs a "
    "quarter of their CPU and memory share) and contested GPU models (`--contest`: whole-GPU work allowed on any "
    "model first looks beyond the models that the mix's constrained work is short of; in gpuspec33 18% of the GPU "
    "tasks need T4s, 13.5% of the GPUs). Measured before the stranded score, 6 candidates: balance 0.25 at the end "
    "on the default list 97.8% against 97.6% (0.1), 97.4% (0.5) and 96.7% (1); contested models raised gpuspec33 "
    "from 79.9% to 81.7% at 100% demand and from 96.6% to 96.8% at the end (5 seeds), and fractional work "
    "avoiding them too lowered the end to 96.2% (3 seeds). With the stranded score (3 seeds), balance 0 ended at "
    "98.2% / 97.0% / 98.9%, and contested models off at 98.2% / 97.1% / 99.0% (gpuspec33 at 100% demand 80.3% "
    "against 82.0%).\n\n"
    "Where Cairn is still behind: at 100% demand on gpuspec33 FGD with first-node ties allocates 92.8% where Cairn "
    "allocates about 82% and best-fit 81%, because the best-fit candidates of unconstrained work are mostly the "
    "small T4 and P100 nodes that model-constrained work needs (6 candidates per GPU model instead lost 1-7 points "
    "at 130%, before the stranded score). This harness's best-fit is a stronger baseline than the paper's: if the "
    "paper's 49% and 290 GPUs are one point, its best baseline left about 9.5% of the GPUs unallocated; best-fit "
    "here leaves 5.7-5.8% at the end, and FGD re-implemented from its authors' simulator does not beat it by 49% in "
    "this harness on any list."
)


def free_nodes(pool) -> list[tuple[str, list[int], int, int]]:
    """(GPU model, free milli per GPU, free CPU, free memory) of every node, whatever the placement."""
    if isinstance(pool, Pool):
        return [(n.model, n.gpus, n.cpu, n.mem) for n in pool.nodes]
    return list(zip(pool.model, pool.gpus, pool.cpu, pool.mem, strict=True))


def fits_somewhere(free, shape, models) -> bool:
    g, c, m = shape
    if not (g or c or m):
        return False  # asks for nothing: never "fits" (it would be drawn forever)
    for model, gpus, cpu, mem in free:
        if c > cpu or m > mem or (models is not None and model not in models):
            continue
        if g == 0 or (g < GPU and max(gpus, default=0) >= g) or (
                g >= GPU and sum(1 for x in gpus if x == GPU) >= g // GPU):
            return True
    return False


# Fixed reserves of the Cairn variants; "cairn" and "best-reserve" take --gpu-node-reserve, the
# other baselines none.
RESERVES = {"cairn-no-reserve": 0.0, "cairn-full-reserve": 1.0}


def inflate(nodes, tasks, policy: str, seed: int, mix, reserve: float = DEFAULT_GPU_NODE_RESERVE,
            options: PolicyOptions | None = None) -> dict:
    """Submit tasks sampled from `tasks` until no GPU task of the list fits anywhere. A task that
    does not fit changes nothing, so once demand passes STOP_AT the draw is restricted to the
    entries that still fit somewhere (re-checked after a run of misses): the same outcome as
    drawing on from the whole list, without the millions of draws that would all miss. `options`: Cairn's
    placement tuning (`candidates`, `balance`, `stranded`, `contest`; None: the policy's defaults)."""
    rng = random.Random(seed)
    order = random.Random(seed * 7919 + 1)
    capacity = sum(n.allocatable.gpu_milli for n in nodes)
    cpu_capacity = sum(n.allocatable.cpu_milli for n in nodes)
    reserve = RESERVES.get(policy, reserve)
    if policy.startswith("cairn"):
        pool = Pool("sim", nodes, mix, reserve, options)
    elif policy == "best-reserve":
        pool = Baseline(nodes, "best", rng, reserve)
    elif policy in ("paper-fgd", "paper-fgd-first"):
        pool = PaperFGD(nodes, tasks, rng, first=policy == "paper-fgd-first")
    elif policy == "paper-best":
        pool = PaperBestFit(nodes, "best", rng)
    else:
        pool = Baseline(nodes, policy, rng)
    arrived = allocated = 0
    at_100 = at_130 = None
    draw = tasks
    misses = 0
    while True:
        shape, models = order.choice(draw)
        arrived += shape[0]
        if isinstance(pool, Pool):
            done = pool.place_gang(shape, 1, models)  # applied to the pool's state when it fits
            ok = done is not None
        else:
            found = pool.place(shape, models)
            ok = found is not None
            if ok:
                pool.take(found[0], found[1], shape)
        if ok:
            allocated += shape[0]
            misses = 0
        else:
            misses += 1
        if at_100 is None and arrived >= capacity:
            at_100 = allocated / capacity
        if at_130 is None and arrived >= STOP_AT * capacity:
            at_130 = allocated / capacity
        if at_130 is not None and (draw is tasks or misses >= 50):
            free = free_nodes(pool)
            alive = {entry for entry in set(draw) if fits_somewhere(free, *entry)}
            draw = [entry for entry in draw if entry in alive]
            misses = 0
            if not any(shape[0] for shape, _ in draw):
                break
    cpu_left = sum(cpu for _, _, cpu, _ in free_nodes(pool))
    return {"at_100": at_100, "at_130": at_130, "full": allocated / capacity, "cpu": 1 - cpu_left / cpu_capacity}


def _run(args):
    nodes, tasks, policy, seed, mix, reserve, options = args
    return inflate(nodes, tasks, policy, seed, mix, reserve, options)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--lists", nargs="+", default=["default", "gpuspec33", "multigpu50"])
    parser.add_argument("--policies", nargs="+",
                        default=["cairn", "cairn-no-reserve", "cairn-full-reserve", "best", "best-reserve", "worst",
                                 "dot", "random", "paper-best", "paper-fgd", "paper-fgd-first"])
    parser.add_argument("--gpu-node-reserve", type=float, default=DEFAULT_GPU_NODE_RESERVE,
                        help="Cairn's (and best-reserve's) GPU-node reserve; default: the service's")
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (processes)")
    parser.add_argument("--balance", type=float, default=_DEFAULT.balance,
                        help="Cairn's balanced GPU placement share (policy default; 0: off)")
    parser.add_argument("--contest", type=float, default=_DEFAULT.contest,
                        help="Cairn's contested-model threshold (policy default; 0: off)")
    parser.add_argument("--stranded", type=float, default=_DEFAULT.stranded,
                        help="Cairn's weight of stranded GPU milli in the placement score (policy default; 0: off)")
    parser.add_argument("--candidates", type=int, default=_DEFAULT.candidates,
                        help="Cairn's nodes scored per replica (policy default)")
    parser.add_argument("--nodes-file", default="openb_node_list_gpu_node.csv",
                        help="the trace's node list (all_node adds its 310 CPU-only nodes)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    nodes = load_alibaba_nodes(TRACE_DIR / args.nodes_file)
    total_gpus = sum(n.allocatable.gpu_milli for n in nodes) / GPU
    table = {}
    work = {}
    for name in args.lists:
        tasks = load_tasks(name)
        counts = Counter((shape, models) for shape, models in tasks if shape[0])
        top = counts.most_common(12)
        weight = sum(c for _, c in top)
        mix = [(c / weight, shape, models) for (shape, models), c in top]
        for policy in args.policies:
            tuning = PolicyOptions(balance=args.balance, contest=args.contest, stranded=args.stranded,
                                   candidates=args.candidates)  # what --balance, --contest, ... measure
            work[(name, policy)] = [(nodes, tasks, policy, seed, mix, args.gpu_node_reserve, tuning)
                                    for seed in range(1, args.seeds + 1)]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as executor:
        futures = {key: [executor.submit(_run, item) for item in items] for key, items in work.items()}
        for (name, policy), pending in futures.items():
            runs = [f.result() for f in pending]
            table[(name, policy)] = row = {k: median([r[k] for r in runs]) for k in ("at_100", "at_130", "full", "cpu")}
            print(f"{name:10} {policy:18} allocated at 100% demand {row['at_100']:.1%}, at 130% {row['at_130']:.1%}, "
                  f"when no task fits {row['full']:.1%} (CPU {row['cpu']:.1%})", flush=True)
    if args.no_record:
        return
    pct = f"{args.gpu_node_reserve:.0%}"
    names = {"cairn": f"Cairn (GPU-node reserve {pct}, the default)", "cairn-no-reserve": "Cairn, no GPU-node reserve",
             "cairn-full-reserve": "Cairn, GPU-node reserve 100%", "best-reserve": f"best-fit with a {pct} GPU-node reserve",
             "best": "best-fit", "worst": "worst-fit", "dot": "dot-product", "random": "random",
             "paper-best": "best-fit as in the FGD paper's simulator", "paper-fgd": "FGD as in its authors' simulator",
             "paper-fgd-first": "FGD, ties to the first node"}
    lines = [
        "### b. Placement quality (FGD workload inflation, alibaba-gpu-2023)",
        "",
        f"`{command_line()}` ({machine()}; median of {args.seeds} seeds). {len(nodes):,} nodes, {total_gpus:,.0f} GPUs; "
        "tasks sampled from the trace (CPU-only ones included, as in the trace) until no GPU task of the list fits "
        "anywhere; a task that fits nowhere is dropped. Figures: share of the cluster's GPUs allocated when the GPUs "
        "asked for reached 100% and 130% of the cluster (the paper's x-axis) and at the end, when no GPU task fits "
        "(the issue's definition); \"unallocated vs best-fit\" compares the GPUs left unallocated at 130% and at "
        "the end; \"CPU at the end\" is the share of the cluster's CPU allocated then (a GPU-node reserve turns "
        "CPU-only tasks away from GPU nodes whose free GPUs need that CPU: there are no CPU-only nodes here).",
        "",
        "| task list | placement | allocated at 100% demand | at 130% demand | when no GPU task fits "
        "| unallocated vs best-fit at 130% | at the end | CPU at the end |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in args.lists:
        best = table.get((name, "best"))
        for policy in args.policies:
            row = table[(name, policy)]
            vs = [f"{(1 - row[k]) / (1 - best[k]) - 1:+.0%}" if best else "n/a" for k in ("at_130", "full")]
            lines.append(f"| {name} | {names[policy]} | {row['at_100']:.1%} | {row['at_130']:.1%} | {row['full']:.1%} "
                         f"| {vs[0]} | {vs[1]} | {row['cpu']:.1%} |")

    def gain(n, policy, k):
        return 1 - (1 - table[(n, policy)][k]) / (1 - table[(n, "best")][k])

    gains = [gain(n, "cairn", "full") for n in args.lists if (n, "cairn") in table and (n, "best") in table]
    gains_130 = [gain(n, "cairn", "at_130") for n in args.lists if (n, "cairn") in table and (n, "best") in table]
    verdict = ("reached: when no GPU task fits, Cairn leaves " + ", ".join(f"{g:.1%}" for g in gains)
               + " fewer GPUs unallocated than best-fit" if gains and min(gains) >= 0.49 else
               "not reached: when no GPU task fits, Cairn leaves " + ", ".join(f"{g:.1%}" for g in gains)
               + " fewer GPUs unallocated than best-fit (at 130% demand " + ", ".join(f"{g:.1%}" for g in gains_130)
               + ")")
    full_reserve = [gain(n, "cairn-full-reserve", "full") for n in args.lists
                    if (n, "cairn-full-reserve") in table and (n, "best") in table]
    if full_reserve:
        verdict += (" at the default GPU-node reserve; with a full reserve " + ", ".join(f"{g:.1%}" for g in full_reserve)
                    + (" (every list at or above 49%)" if min(full_reserve) >= 0.49 else ""))
    fgd = [gain(n, "paper-fgd-first", "full") for n in args.lists
           if (n, "paper-fgd-first") in table and (n, "best") in table]
    lines += ["", "Target: at least the gain FGD reports over best-fit (up to 49% fewer unallocated GPUs): "
              f"{verdict} (lists {', '.join(args.lists)})."]
    fgd_random = [gain(n, "paper-fgd", "full") for n in args.lists if (n, "paper-fgd") in table and (n, "best") in table]
    if fgd and fgd_random:
        def fewer(gs):
            return ", ".join(f"{abs(g):.0%} {'fewer' if g >= 0 else 'more'}" for g in gs)

        lines += ["", "FGD itself, re-implemented from its authors' simulator in this harness (`PaperFGD` in the "
                  f"script), leaves {fewer(fgd)} GPUs unallocated than best-fit when no GPU task fits with ties broken "
                  f"towards the first node, and {fewer(fgd_random)} with kube-scheduler's random tie-break: the 49% "
                  "is not a property of the score that this harness reproduces."]
    lines += ["", FINDINGS]
    record("b", "\n".join(lines))


if __name__ == "__main__":
    main()
