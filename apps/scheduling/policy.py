"""The scheduling policy: a pure function over plain data (no ORM, no I/O).

`schedule(snapshot)` takes nodes, quotas, running and pending workloads and returns one decision
per pending workload (`Admit` with a placement, or `Wait` with a reason, an optional estimated
start and its queue position) plus `Preempt` decisions for running workloads that must make
room. The same function runs in the service, in the unit tests and in the trace simulator.

The semantics (docs/scheduling.md has the user-facing version):

- Order: work within its project's nominal before work that would borrow, then priority class
  (P0 first), then fair share (the project's dominant share of its nominal quota in the pool,
  updated as the cycle admits), then submit time.
- Quota per project and pool: `nominal` is guaranteed; projects of a pool form a cohort and may
  borrow each other's unused nominal up to their `borrowing_limit`, while a `lending_limit`
  keeps the rest of a lender's nominal private. GPU-hour budgets are checked at admission.
- Gang: all replicas are placed at once or none is.
- Placement: per-GPU accounting in milli-GPU; candidates come from best-fit buckets (fewest
  whole free GPUs first) and the one that adds the least fragmentation for the current task mix
  wins (the FGD idea); multi-replica workloads stay in the fewest topology domains.
- Preemption: a higher priority preempts lower priorities of its own project; a project within
  its nominal reclaims from borrowers; the victim set is minimal; non-preemptible workloads are
  never chosen. Victims are stopped gracefully by the service and requeued.
- Backfill: the first workload of a pool blocked by capacity gets a reservation (its future
  placement is held), so later, smaller workloads fill around it without starving it.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

GPU = 1000  # milli-GPU in one GPU
# Anti-thrash: once preempted, a workload may not be reclaimed again before it has run this long
# since its re-admission (the service's and the simulator's default; Snapshot's is 0 = off). An hour
# lets a job that checkpoints hourly save its work first. Measured in benchmark d (8 nodes, hourly
# checkpoints): against 600 s, a third of the preemptions and of the work redone and shorter waits;
# against none, a fifth of the preemptions and shorter waits for a fifth more work redone.
DEFAULT_REPREEMPT_MIN_RUNTIME = 3600.0
DEFAULT_STARVATION_SECONDS = 3600.0
# GPU nodes keep this share of each free GPU's part of their CPU and memory for GPU work: work that
# asks for no GPU may not take it (the service's and the simulator's default; Snapshot's is 0 = off).
DEFAULT_GPU_NODE_RESERVE = 0.5


@dataclass(frozen=True)
class Resources:
    gpu_milli: int = 0
    cpu_milli: int = 0
    memory_mb: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.gpu_milli + other.gpu_milli, self.cpu_milli + other.cpu_milli,
                         self.memory_mb + other.memory_mb)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.gpu_milli - other.gpu_milli, self.cpu_milli - other.cpu_milli,
                         self.memory_mb - other.memory_mb)

    def times(self, n: int) -> Resources:
        return Resources(self.gpu_milli * n, self.cpu_milli * n, self.memory_mb * n)

    def fits_in(self, other: Resources) -> bool:
        return (self.gpu_milli <= other.gpu_milli and self.cpu_milli <= other.cpu_milli
                and self.memory_mb <= other.memory_mb)

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.gpu_milli, self.cpu_milli, self.memory_mb)


@dataclass
class NodeState:
    """A node's allocatable resources (what running workloads use is subtracted by the policy)."""

    name: str
    pool: str
    allocatable: Resources  # gpu_milli = number of GPUs x 1000
    gpu_model: str = ""
    schedulable: bool = True
    domains: tuple[str, ...] = ()  # topology domains, finest first (e.g. NVLink block, then rack)


@dataclass
class QuotaState:
    project: str
    pool: str
    nominal: Resources
    borrowing_limit_gpu_milli: int | None = None  # None: may borrow any unused nominal of the pool
    lending_limit_gpu_milli: int | None = None  # None: all of its unused nominal may be lent
    gpu_hour_budget: float | None = None  # per budget period; None: no budget
    gpu_hours_used: float = 0.0  # this period, including running workloads up to now
    budget_period: str = "month"


@dataclass(frozen=True)
class PendingWorkload:
    id: int
    project: str
    pool: str
    priority: int  # 0 (P0) is the highest
    submitted_at: datetime
    replicas: int
    per_replica: Resources
    gpu_model: str = ""  # allowed models, "|"-separated ("A100|H100"); empty: any
    expected_seconds: float | None = None  # how long it will hold its resources, when known
    name: str = ""
    # Requeued after a preemption: the workload that preempted it. While that one is still
    # pending, this one is not considered before it (it must not take back what it gave up).
    preempted_by: int | None = None


@dataclass(frozen=True)
class RunningWorkload:
    """A workload holding resources: admitted, running, or stopping (still holding until it exits)."""

    id: int
    project: str
    pool: str
    priority: int
    per_replica: Resources
    placement: tuple[dict, ...]  # {"replica", "node", "gpus": [indices]} per replica
    preemptible: bool = True
    admitted_at: datetime | None = None
    expected_end: datetime | None = None  # when it is expected to release its resources
    stopping: bool = False  # already stopping (or being preempted): not a victim candidate
    preempted_for: int | None = None  # the pending workload this one is being preempted for
    preemptions: int = 0  # how often it has been preempted before


@dataclass(frozen=True)
class Admit:
    workload_id: int
    placement: list[dict]  # one {"replica": i, "node": name, "gpus": [...]} per replica


class WaitKind:
    """What a pending workload waits on, for code (a Wait's `reason` is for people). The values
    are the API's `waiting_on` (apps/workloads/choices.py WaitingOn has the same, with labels)."""

    CONSTRAINT = "constraint"  # no schedulable node has an allowed GPU model
    CAPACITY = "capacity"  # no place fits it now
    BUDGET = "budget"  # its project's GPU-hour budget
    RESERVED = "reserved"  # capacity is reserved for it as running work ends
    PREEMPTING = "preempting"  # waiting for the workloads it preempted to exit
    QUOTA_LIMIT = "quota_limit"  # its project's nominal + borrowing limit
    QUOTA_LENT = "quota_lent"  # within its nominal, which other projects borrow
    QUOTA_LENDABLE = "quota_lendable"  # beyond its nominal; the pool has too little unused quota to lend
    QUOTA_NONE = "quota_none"  # its project has no quota on the pool


WAIT_KIND_LABELS = {
    WaitKind.CONSTRAINT: "constraint", WaitKind.CAPACITY: "capacity", WaitKind.BUDGET: "budget",
    WaitKind.RESERVED: "reserved", WaitKind.PREEMPTING: "preempting",
    WaitKind.QUOTA_LIMIT: "quota: at its limit", WaitKind.QUOTA_LENT: "quota: nominal lent out",
    WaitKind.QUOTA_LENDABLE: "quota: nothing left to borrow", WaitKind.QUOTA_NONE: "quota: none on the pool",
}


@dataclass(frozen=True)
class Wait:
    workload_id: int
    reason: str
    estimated_start: datetime | None = None
    queue_position: int | None = None  # 1-based, within the pool, in the order the policy considers
    kind: str = ""  # a WaitKind (or a baseline's own, e.g. the simulator's FIFO)


class QuotaBlock(NamedTuple):
    kind: str  # a WaitKind.QUOTA_*
    reason: str


@dataclass(frozen=True)
class Preempt:
    workload_id: int  # the victim (a running workload)
    preemptor_id: int
    reason: str


Decision = Admit | Wait | Preempt


@dataclass
class Snapshot:
    nodes: list[NodeState]
    quotas: list[QuotaState]
    pending: list[PendingWorkload]
    running: list[RunningWorkload] = field(default_factory=list)
    now: datetime | None = None
    # Shapes the placement keeps room for: (weight, per-replica resources[, allowed GPU models as in
    # PendingWorkload.gpu_model]). Default: the pending ones.
    task_mix: list[tuple] | None = None
    reservations: bool = True  # backfill with a reservation for the head of each pool
    preemption: bool = True
    grace_seconds: float = 30.0  # how long a preempted workload takes to exit (for estimates)
    # Anti-thrash: a workload that has been preempted before is not reclaimed by another project
    # again until it has run this long since its last admission (0: no protection).
    repreempt_min_runtime_seconds: float = 0.0
    # Bounded wait: a workload pending this long (since submission; never a requeued victim) is
    # ordered before newer work of any priority, so it takes the capacity it fits or the pool's
    # reservation and newer work backfills around it. Its priority for preemption is unchanged.
    # None or 0: strict priority order.
    starvation_seconds: float | None = None
    # On a node with free GPUs, work that asks for no GPU may not bring the node's free CPU or
    # memory below this share of what the free GPUs' part of the node is (a node with 8 GPUs and
    # 96 CPUs, 3 GPUs free and 0.5: 18 CPUs stay for GPU work), so CPU-only work does not strand
    # GPUs for lack of CPU or memory. 0: off; 1: CPU-only work only where every GPU is taken.
    gpu_node_reserve: float = 0.0


def kept_for_gpus(share: float, free_gpu_milli: int, gpu_milli: int, cpu_milli: int, memory_mb: int) -> tuple[int, int]:
    """CPU and memory a node with `gpu_milli` GPUs (`free_gpu_milli` free) keeps for them: `share`
    of the free GPUs' part of the node's `cpu_milli` and `memory_mb`."""
    if not share or not gpu_milli or not free_gpu_milli:
        return 0, 0
    part = share * free_gpu_milli / gpu_milli
    return int(cpu_milli * part), int(memory_mb * part)


# -- formatting ----------------------------------------------------------------------------------

def _fmt(r: tuple[int, int, int] | Resources) -> str:
    g, c, m = r.as_tuple() if isinstance(r, Resources) else r
    return f"{g / 1000:g} GPU, {c / 1000:g} CPU, {m / 1024:g} GiB"


_UNITS = (("GPU", 1000), ("CPU", 1000), ("GiB of memory", 1024))


# -- quota: one cohort per pool ------------------------------------------------------------------

class _Quota:
    __slots__ = ("state", "nominal", "used", "lend", "borrow", "hours_left")

    def __init__(self, state: QuotaState):
        self.state = state
        self.nominal = state.nominal.as_tuple()
        self.used = [0, 0, 0]
        inf = math.inf
        lend = state.lending_limit_gpu_milli
        self.lend = (min(lend, self.nominal[0]) if lend is not None else self.nominal[0], self.nominal[1],
                     self.nominal[2])
        borrow = state.borrowing_limit_gpu_milli
        self.borrow = (borrow if borrow is not None else inf, inf, inf)
        self.hours_left = None if state.gpu_hour_budget is None else state.gpu_hour_budget - state.gpu_hours_used

    def draw(self, d: int, used: int) -> int:
        """How much of the cohort's lendable pool this quota takes with `used` in dimension d."""
        guaranteed = self.nominal[d] - self.lend[d]
        own_lendable = min(self.lend[d], max(0, used - guaranteed))
        return own_lendable + max(0, used - self.nominal[d])

    def share(self) -> float:
        best = 0.0
        for d in range(3):
            if self.used[d] > 0:
                best = max(best, self.used[d] / self.nominal[d] if self.nominal[d] else math.inf)
        return best

    def borrowing(self) -> bool:
        return any(self.used[d] > self.nominal[d] for d in range(3))


class _Cohort:
    """The quotas of one pool: nominal, borrowing and lending arithmetic, kept incrementally."""

    def __init__(self, pool: str, quotas: Iterable[QuotaState]):
        self.pool = pool
        self.quotas = {q.project: _Quota(q) for q in quotas}
        self.capacity = [sum(q.lend[d] for q in self.quotas.values()) for d in range(3)]
        self.drawn = [0, 0, 0]
        self.version = 0  # bumped on every change of usage or budget (for memoised decisions)
        self.borrowers: set[str] = set()  # projects using more than their nominal
        # Quota held this cycle for waiting work (a reservation, a preemptor's claim): it counts
        # against the cohort, but it is not running work that others could reclaim.
        self.claimed: dict[str, list[int]] = {}

    def add(self, project: str, r: tuple[int, int, int], sign: int = 1) -> None:
        q = self.quotas.get(project)
        if q is None:
            return
        self.version += 1
        for d in range(3):
            before = q.draw(d, q.used[d])
            q.used[d] += sign * r[d]
            self.drawn[d] += q.draw(d, q.used[d]) - before
        if q.borrowing():
            self.borrowers.add(project)
        else:
            self.borrowers.discard(project)

    def claim(self, project: str, need: tuple[int, int, int],
              freed: Iterable[tuple[str, tuple[int, int, int]]] = ()) -> None:
        """Hold `need` of the project's quota for a waiting workload, for the rest of the cycle.

        `freed`: (project, usage) of the running work whose end the claim waits for. The pool's
        lendable quota counts the claim only beyond what their end gives back: that quota is held
        once, by the work still on it, and not a second time for its successor (a reservation for
        8 GPUs would otherwise keep 8 GPUs of quota unused for as long as it waits)."""
        before = list(self.drawn)
        self.add(project, need)
        held = self.claimed.setdefault(project, [0, 0, 0])
        for d in range(3):
            held[d] += need[d]
        freed = list(freed)
        if not freed:
            return
        claimed = [self.drawn[d] - before[d] for d in range(3)]
        with_freed = list(self.drawn)
        for p, usage in freed:
            self.add(p, usage, sign=-1)
        back = [with_freed[d] - self.drawn[d] for d in range(3)]
        for p, usage in reversed(freed):
            self.add(p, usage)
        for d in range(3):
            self.drawn[d] -= max(0, min(claimed[d], back[d]))

    def runs_borrowed(self, project: str, uses: tuple[int, int, int], need: tuple[int, int, int]) -> bool:
        """Whether the project's running work, claims aside, uses more than its nominal of a resource
        that a victim using `uses` would give back and a preemptor needing `need` asks for: only then
        may another project reclaim that victim (a project borrowing GPUs keeps its CPU-only work
        from a preemptor that needs CPU)."""
        q = self.quotas.get(project)
        if q is None or project not in self.borrowers:
            return False
        held = self.claimed.get(project, (0, 0, 0))
        return any(uses[d] and need[d] and q.used[d] - held[d] > q.nominal[d] for d in range(3))

    def within_nominal(self, project: str, need: tuple[int, int, int]) -> bool:
        q = self.quotas.get(project)
        return q is not None and all(q.used[d] + need[d] <= q.nominal[d] for d in range(3))

    def check(self, project: str, need: tuple[int, int, int]) -> QuotaBlock | None:
        """None if admitting `need` keeps the project within nominal + what it may borrow, else
        what blocks it."""
        q = self.quotas.get(project)
        if q is None:
            return QuotaBlock(WaitKind.QUOTA_NONE, f"quota: project '{project}' has no quota on pool '{self.pool}'")
        for d, (unit, scale) in enumerate(_UNITS):
            if need[d] == 0:
                continue
            after = q.used[d] + need[d]
            limit = q.nominal[d] + q.borrow[d]
            if after > limit:
                return QuotaBlock(WaitKind.QUOTA_LIMIT,
                                  f"quota: project '{project}' uses {q.used[d] / scale:g} {unit} on pool '{self.pool}' "
                                  f"(nominal {q.nominal[d] / scale:g}"
                                  + (f", may borrow {q.borrow[d] / scale:g}" if q.borrow[d] != math.inf else "")
                                  + f"); this workload needs {need[d] / scale:g}")
            extra = q.draw(d, after) - q.draw(d, q.used[d])
            free = self.capacity[d] - self.drawn[d]
            if extra > free:
                if after <= q.nominal[d]:
                    return QuotaBlock(WaitKind.QUOTA_LENT,
                                      f"quota: project '{project}' is within its nominal {q.nominal[d] / scale:g} {unit} "
                                      f"on pool '{self.pool}', but other projects have borrowed it; they are reclaimed "
                                      f"from borrowers when preemptible")
                own_free = max(0, q.nominal[d] - q.used[d])
                guaranteed_free = max(0, q.nominal[d] - q.lend[d] - q.used[d])
                can_get = max(0, min(limit - q.used[d], guaranteed_free + max(free, 0)))
                return QuotaBlock(WaitKind.QUOTA_LENDABLE,
                                  f"quota: project '{project}' has {own_free / scale:g} of its nominal "
                                  f"{q.nominal[d] / scale:g} {unit} free on pool '{self.pool}' and can borrow "
                                  f"{max(0, can_get - own_free) / scale:g} more from other projects; this workload "
                                  f"needs {need[d] / scale:g}")
        return None

    def budget_check(self, project: str, w: PendingWorkload, need_gpu: int) -> str | None:
        q = self.quotas.get(project)
        if q is None or q.hours_left is None or need_gpu == 0:
            return None
        budget = q.state.gpu_hour_budget
        needed = need_gpu / GPU * (w.expected_seconds or 0) / 3600
        if q.hours_left <= 0 or needed > q.hours_left:
            left = max(q.hours_left, 0)
            detail = f"; this workload needs up to {needed:g}" if needed else ""
            return (f"budget: project '{project}' has {left:.4g} of its {budget:g} GPU-hours left this "
                    f"{q.state.budget_period} on pool '{self.pool}'{detail}")
        return None

    def charge_budget(self, project: str, w: PendingWorkload, need_gpu: int) -> None:
        q = self.quotas.get(project)
        if q is not None and q.hours_left is not None and w.expected_seconds:
            q.hours_left -= need_gpu / GPU * w.expected_seconds / 3600
            self.version += 1


# -- nodes and placement -------------------------------------------------------------------------

class _Node:
    __slots__ = ("name", "model", "gpus", "cpu", "mem", "domains", "full", "partial", "idx", "ngpu", "cap_cpu",
                 "cap_mem")

    def __init__(self, idx: int, state: NodeState):
        self.idx = idx
        self.name = state.name
        self.model = state.gpu_model
        self.ngpu = state.allocatable.gpu_milli // GPU
        self.gpus = [GPU] * self.ngpu
        self.cpu = state.allocatable.cpu_milli
        self.mem = state.allocatable.memory_mb
        self.cap_cpu = self.cpu
        self.cap_mem = self.mem
        self.domains = state.domains
        self.full = self.ngpu
        self.partial = False

    def key(self) -> tuple:
        return (tuple(sorted(self.gpus)), self.cpu, self.mem, self.model)


def _whole(g: int) -> int:
    return -(-g // GPU)


class _Pool:
    """Mutable free-capacity view of one pool's schedulable nodes, indexed for best-fit lookups."""

    # Nodes scored per replica, gathered from the best-fit buckets upwards; the fragmentation and
    # stranding scores then decide. `bench/scheduler_placement.py --candidates N` at the end point
    # (default / gpuspec33 / multigpu50): 6 98.1 / 97.1 / 98.9%, 12 98.2 / 97.3 / 99.0%, 24 the same as
    # 12; against 6, 12 made benchmark a's cycle up to 30% longer, 24 35-70% longer.
    CANDIDATES = 12
    # GPU work prefers, among those candidates, nodes where it leaves the node's other free GPUs at
    # least this share of their part of its CPU and memory (a 1-GPU job taking 11 of a 2-GPU node's
    # 16 CPUs strands the other GPU). A preference, never a refusal: `bench/scheduler_placement.py
    # --policies cairn --balance X`, before the stranded score and with 6 candidates, measured 0.25 at
    # or above 0.1, 0.4, 0.5, 0.75 and 1 at the end point on all three task lists (e.g. default 97.8%
    # against 97.6%, 97.4% and 96.7% for 0.1, 0.5 and 1); with them, 0 (off) lowered gpuspec33 from
    # 97.3% to 97.0% and multigpu50 from 99.0% to 98.9%.
    BALANCE = 0.25
    # A candidate's score adds STRANDED x the GPU milli it leaves stranded: free GPUs on the node
    # without the CPU or memory that the task mix's GPU work asks per GPU on average (see stranded()).
    # Fragmentation alone sees a GPU as lost only once no shape of the mix fits beside it, so it let
    # CPU-heavy fractional tasks (0.47 GPU with 12 CPUs) drain the CPU of 12-CPU-per-GPU nodes whose
    # other GPUs then went unused, while 52-CPU-per-GPU nodes had CPU to spare. Benchmark b (`--stranded
    # W`) ends alike for 2 to 16 and lower for 0 (off); benchmark d's fairness on its small samples
    # swings with it and was best at 2 of 2, 4 and 8 (docs/benchmarks.md).
    STRANDED = 2

    def __init__(self, name: str, nodes: list[NodeState], mix: list[tuple], gpu_node_reserve: float = 0.0):
        self.name = name
        self.reserve = gpu_node_reserve
        self.nodes = [_Node(i, n) for i, n in enumerate(nodes)]
        self.by_name = {n.name: n for n in self.nodes}
        self.max_gpus = max((n.ngpu for n in self.nodes), default=0)
        # buckets[k]: nodes with exactly k whole free GPUs; partial: nodes with a partly used GPU.
        self.buckets: list[dict[int, _Node]] = [{} for _ in range(self.max_gpus + 1)]
        self.partial: dict[int, _Node] = {}
        for n in self.nodes:
            self.buckets[n.full][n.idx] = n
        # (weight, (gpu, cpu, memory) per replica, allowed GPU models or None)
        self.mix = [(entry[0], entry[1], entry[2] if len(entry) > 2 else None) for entry in mix]
        self._frag_memo: dict[tuple, float] = {}
        self.models = {n.model for n in self.nodes}
        self.contested = self._contested() if self.CONTEST else frozenset()
        # The mix's average CPU and memory per GPU milli, over its GPU shapes.
        gpu_weight = sum(weight * g for weight, (g, _, _), _ in self.mix if g)
        self.cpu_per_gpu = sum(weight * c for weight, (g, c, _), _ in self.mix if g) / gpu_weight if gpu_weight else 0.0
        self.mem_per_gpu = sum(weight * m for weight, (g, _, m), _ in self.mix if g) / gpu_weight if gpu_weight else 0.0
        self.changes = 0  # bumped on every change of free capacity (for memoised summaries)
        self.free_gpu = sum(n.ngpu for n in self.nodes) * GPU
        self._summary: dict[frozenset[str] | None, tuple[int, tuple[int, tuple[int, int, int]]]] = {}

    # A GPU model is contested when the task mix's work limited to a few models (an allowed-model
    # constraint) asks for more than CONTEST x that model's share of the pool's GPUs (a shape
    # allowed on k models counts 1/k towards each). Whole-GPU work allowed on any model then takes other
    # models' nodes while any fits, and leaves the contested ones to the work that needs them
    # (bench b, gpuspec33: 18% of its GPU tasks need T4s, 13.5% of the GPUs; 0 turns it off;
    # `--contest` measured 0.5 against off, and fractional work avoiding them too, in docs/benchmarks.md;
    # with the stranded score, off lowered gpuspec33 at 100% demand from 82.0% to 80.3%).
    CONTEST = 0.5

    def _contested(self) -> frozenset[str]:
        """GPU models that constrained work in the task mix is short of (see CONTEST)."""
        capacity: dict[str, int] = {}
        for n in self.nodes:
            capacity[n.model] = capacity.get(n.model, 0) + n.ngpu
        total_capacity = sum(capacity.values())
        demand: dict[str, float] = {}
        total = 0.0
        for weight, (g, _, _), models in self.mix:
            total += weight * g
            present = [x for x in models or () if capacity.get(x)]
            if not present or len(present) == len(capacity):
                continue
            for x in present:
                demand[x] = demand.get(x, 0.0) + weight * g / len(present)
        if not total or not total_capacity:
            return frozenset()
        return frozenset(x for x, d in demand.items() if d / total > self.CONTEST * capacity[x] / total_capacity)

    # bookkeeping
    def _reindex(self, n: _Node) -> None:
        full = sum(1 for g in n.gpus if g == GPU)
        partial = any(0 < g < GPU for g in n.gpus)
        if full != n.full:
            del self.buckets[n.full][n.idx]
            self.buckets[full][n.idx] = n
            n.full = full
        if partial != n.partial:
            if partial:
                self.partial[n.idx] = n
            else:
                self.partial.pop(n.idx, None)
            n.partial = partial

    def take(self, n: _Node, gpus: list[int], g: int, c: int, m: int, sign: int = 1) -> None:
        per_gpu = g if g < GPU else GPU
        for i in gpus:
            n.gpus[i] -= sign * per_gpu
        self.free_gpu -= sign * per_gpu * len(gpus)
        n.cpu -= sign * c
        n.mem -= sign * m
        self.changes += 1
        self._reindex(n)

    # Fragmentation (the FGD measure, Weng et al., ATC'23): the free GPU milli of the node that the
    # task mix could not use, weighted by each shape's share: all of it for a shape that cannot run
    # there (GPU model not allowed, not enough CPU, memory or GPUs), else the free milli of the GPUs
    # with less free than the shape needs per GPU.
    def frag(self, n: _Node) -> float:
        key = n.key()
        value = self._frag_memo.get(key)
        if value is not None:
            return value
        total_free = sum(n.gpus)
        value = 0.0
        if total_free:
            for weight, (g, c, m), models in self.mix:
                if c > n.cpu or m > n.mem or (models is not None and n.model not in models):
                    value += weight * total_free
                elif g == 0:
                    continue
                elif g < GPU:
                    value += weight * sum(x for x in n.gpus if x < g)
                else:
                    k = _whole(g)
                    if sum(1 for x in n.gpus if x == GPU) >= k:
                        value += weight * sum(x for x in n.gpus if x < GPU)
                    else:
                        value += weight * total_free
        if len(self._frag_memo) > 200_000:
            self._frag_memo.clear()
        self._frag_memo[key] = value
        return value

    def stranded(self, n: _Node) -> float:
        """Free GPU milli of n beyond what its free CPU and memory could serve at the mix's average
        CPU and memory per GPU."""
        if not self.cpu_per_gpu and not self.mem_per_gpu:
            return 0.0
        by_cpu = n.cpu / self.cpu_per_gpu if self.cpu_per_gpu else math.inf
        by_mem = n.mem / self.mem_per_gpu if self.mem_per_gpu else math.inf
        return max(0.0, sum(n.gpus) - min(by_cpu, by_mem))

    def waste(self, n: _Node) -> float:
        """What placement minimises the growth of: fragmentation plus weighted stranded GPU milli."""
        return self.frag(n) + self.STRANDED * self.stranded(n) if self.STRANDED else self.frag(n)

    def reserved(self, n: _Node) -> tuple[int, int]:
        """CPU and memory of n that work asking for no GPU may not take (Snapshot.gpu_node_reserve)."""
        return kept_for_gpus(self.reserve, sum(n.gpus), n.ngpu * GPU, n.cap_cpu, n.cap_mem)

    def _gpus_for(self, n: _Node, g: int) -> list[int] | None:
        """GPU indices a replica of `g` milli would take on n (best fit for a fraction), or None."""
        if g == 0:
            return []
        if g >= GPU:
            k = _whole(g)
            free = [i for i, x in enumerate(n.gpus) if x == GPU]
            return free[:k] if len(free) >= k else None
        best = None
        for i, x in enumerate(n.gpus):
            if x >= g and (best is None or x < n.gpus[best]):
                best = i
        return None if best is None else [best]

    def _candidates(self, shape: tuple[int, int, int], models: frozenset[str] | None,
                    allowed: set[int] | None, avoid: bool = True) -> list[_Node]:
        g, c, m = shape
        out: list[_Node] = []
        limit = self.CANDIDATES

        # Whole-GPU work that may run on any model first looks beyond the contested models.
        skip = self.contested if avoid and g >= GPU and models is None and self.contested else None

        def consider(nodes: Iterable[_Node]) -> bool:
            for n in nodes:
                if allowed is not None and n.idx not in allowed:
                    continue
                if skip is not None and n.model in skip:
                    continue
                if models is not None and n.model not in models:
                    continue
                if n.cpu < c or n.mem < m:
                    continue
                if g == 0 and self.reserve:
                    keep_cpu, keep_mem = self.reserved(n)
                    if n.cpu - c < keep_cpu or n.mem - m < keep_mem:
                        continue
                if 0 < g < GPU and n.full == 0 and max(n.gpus, default=0) < g:
                    continue
                out.append(n)
                if len(out) >= limit:
                    return True
            return False

        if 0 < g < GPU and consider(self.partial.values()):
            return out
        first = _whole(g) if g else 0
        for k in range(max(first, 1 if 0 < g < GPU else 0), self.max_gpus + 1):
            if consider(self.buckets[k].values()):
                return out
        if skip is not None and not out:
            return self._candidates(shape, models, allowed, avoid=False)
        return out

    def place_one(self, shape: tuple[int, int, int], models: frozenset[str] | None,
                  allowed: set[int] | None = None) -> tuple[_Node, list[int]] | None:
        g, c, m = shape
        best = None
        candidates = [(n, gpus) for n in self._candidates(shape, models, allowed)
                      if (gpus := self._gpus_for(n, g)) is not None]
        if g and len(candidates) > 1:
            candidates = self._balanced(candidates, shape) or candidates
        for n, gpus in candidates:
            if not self.mix or len(self.nodes) == 1:
                return n, gpus
            before = self.waste(n)
            self.take(n, gpus, g, c, m)
            delta = self.waste(n) - before
            self.take(n, gpus, g, c, m, sign=-1)
            score = (delta, n.cpu - c, n.idx)
            if best is None or score < best[0]:
                best = (score, n, gpus)
        return None if best is None else (best[1], best[2])

    def _balanced(self, candidates: list[tuple[_Node, list[int]]],
                  shape: tuple[int, int, int]) -> list[tuple[_Node, list[int]]]:
        """The (node, GPUs) candidates where a GPU replica of `shape` leaves the node's other free
        GPUs BALANCE of their share of its CPU and memory."""
        g, c, m = shape
        out = []
        for n, gpus in candidates:
            keep_cpu, keep_mem = kept_for_gpus(self.BALANCE, sum(n.gpus) - min(g, GPU) * len(gpus), n.ngpu * GPU,
                                               n.cap_cpu, n.cap_mem)
            if n.cpu - c >= keep_cpu and n.mem - m >= keep_mem:
                out.append((n, gpus))
        return out

    def capacity_for(self, n: _Node, shape: tuple[int, int, int]) -> int:
        """How many replicas of `shape` fit on n right now."""
        g, c, m = shape
        if g == 0:
            keep_cpu, keep_mem = self.reserved(n)
            return max(0, min((n.cpu - keep_cpu) // c if c else 10**6, (n.mem - keep_mem) // m if m else 10**6))
        count = min(n.cpu // c if c else 10**6, n.mem // m if m else 10**6)
        if g >= GPU:
            return min(count, n.full // _whole(g))
        return min(count, sum(x // g for x in n.gpus))

    def place_gang(self, shape: tuple[int, int, int], replicas: int,
                   models: frozenset[str] | None) -> list[tuple[_Node, list[int]]] | None:
        """Place every replica (applied to the state) or nothing (state unchanged)."""
        if replicas > 1 and any(n.domains for n in self.nodes):
            groups = self._domain_groups(shape, replicas, models)
            if groups is not None:
                for allowed in groups:
                    done = self._place_seq(shape, replicas, models, allowed)
                    if done is not None:
                        return done
                return None
        return self._place_seq(shape, replicas, models, None)

    def _place_seq(self, shape, replicas, models, allowed) -> list[tuple[_Node, list[int]]] | None:
        g, c, m = shape
        done: list[tuple[_Node, list[int]]] = []
        for _ in range(replicas):
            found = self.place_one(shape, models, allowed)
            if found is None:
                for n, gpus in done:
                    self.take(n, gpus, g, c, m, sign=-1)
                return None
            self.take(found[0], found[1], g, c, m)
            done.append(found)
        return done

    def _domain_groups(self, shape, replicas, models) -> list[set[int]] | None:
        """Node sets to try, fewest topology domains first: the tightest single domain at the
        finest level that can hold the whole gang, then coarser levels, then the fewest domains."""
        levels = max(len(n.domains) for n in self.nodes)
        tries: list[set[int]] = []
        for level in range(levels):
            capacity: dict[str, int] = {}
            members: dict[str, set[int]] = {}
            for n in self.nodes:
                if models is not None and n.model not in models or len(n.domains) <= level:
                    continue
                fit = self.capacity_for(n, shape)
                if fit:
                    dom = n.domains[level]
                    capacity[dom] = capacity.get(dom, 0) + fit
                    members.setdefault(dom, set()).add(n.idx)
            fitting = sorted((cap, dom) for dom, cap in capacity.items() if cap >= replicas)
            if fitting:
                tries.extend(members[dom] for _, dom in fitting[:2])
                return tries
            if level == levels - 1 and capacity:
                # No single domain: take the biggest domains until the gang fits.
                chosen: set[int] = set()
                total = 0
                for cap, dom in sorted(((cap, dom) for dom, cap in capacity.items()), reverse=True):
                    chosen |= members[dom]
                    total += cap
                    if total >= replicas:
                        break
                tries.append(chosen)
        return tries or None

    def free_summary(self, models: frozenset[str] | None) -> tuple[int, tuple[int, int, int]]:
        cached = self._summary.get(models)
        if cached is not None and cached[0] == self.changes:
            return cached[1]
        most = (0, 0, 0)
        count = 0
        for n in self.nodes:
            if models is not None and n.model not in models:
                continue
            count += 1
            here = (sum(n.gpus), n.cpu, n.mem)
            if here > most:
                most = here
        self._summary[models] = (self.changes, (count, most))
        return count, most


# -- the cycle -----------------------------------------------------------------------------------

def _models(w: PendingWorkload) -> frozenset[str] | None:
    return frozenset(m for m in w.gpu_model.split("|") if m) if w.gpu_model else None


def _placement(done: list[tuple[_Node, list[int]]]) -> list[dict]:
    return [{"replica": i, "node": n.name, "gpus": list(gpus)} for i, (n, gpus) in enumerate(done)]


class _Cycle:
    MEMO_WAITS = True  # memoised waits (see run()); off only to test that they change nothing

    def __init__(self, snapshot: Snapshot):
        self.snap = snapshot
        self.now = snapshot.now
        nodes_by_pool: dict[str, list[NodeState]] = {}
        for node in snapshot.nodes:
            if node.schedulable:
                nodes_by_pool.setdefault(node.pool, []).append(node)
        mix = self._mix(snapshot)
        pools = {w.pool for w in snapshot.pending} | set(nodes_by_pool)
        self.pools = {p: _Pool(p, nodes_by_pool.get(p, []), mix.get(p, []), snapshot.gpu_node_reserve)
                      for p in pools}
        quotas_by_pool: dict[str, list[QuotaState]] = {}
        for q in snapshot.quotas:
            quotas_by_pool.setdefault(q.pool, []).append(q)
        self.cohorts = {p: _Cohort(p, quotas_by_pool.get(p, [])) for p in pools | set(quotas_by_pool)}
        self.running = {r.id: r for r in snapshot.running}
        self.candidates: dict[tuple[str, str], list[RunningWorkload]] = {}
        for r in snapshot.running:
            if r.preemptible and not r.stopping:
                self.candidates.setdefault((r.pool, r.project), []).append(r)
        self.preempt_failed: set[tuple] = set()
        self.allocs: dict[int, list[tuple[_Node, list[int]]]] = {}
        for r in snapshot.running:
            self._occupy_running(r)
        self.victims: set[int] = set()
        # Pending workloads whose victims are still exiting: they wait for those, and preempt no more.
        self.awaiting: dict[int, list[int]] = {}
        for r in snapshot.running:
            if r.stopping and r.preempted_for is not None:
                self.awaiting.setdefault(r.preempted_for, []).append(r.id)
        self.reserved_pools: set[str] = set()
        self.failed: set[tuple] = set()
        self._shares: dict[tuple[str, str], tuple[int, float]] = {}

    @staticmethod
    def _mix(snapshot: Snapshot) -> dict[str, list[tuple]]:
        """Per pool, the 8 most frequent (shape, allowed GPU models) of the task mix, with weights."""
        counts: dict[str, dict[tuple, float]] = {}
        if snapshot.task_mix is not None:
            shapes: dict[tuple, float] = {}
            for weight, r, *model in snapshot.task_mix:
                kind = (r.as_tuple(), model[0] if model else "")
                shapes[kind] = shapes.get(kind, 0) + weight
            pools = {n.pool for n in snapshot.nodes}
            for p in pools:
                counts[p] = shapes
        else:
            for w in snapshot.pending:
                shape = w.per_replica.as_tuple()
                if shape[0]:
                    pool = counts.setdefault(w.pool, {})
                    kind = (shape, w.gpu_model)
                    pool[kind] = pool.get(kind, 0) + w.replicas
        out = {}
        for p, shapes in counts.items():
            top = sorted(shapes.items(), key=lambda kv: -kv[1])[:8]
            total = sum(v for _, v in top) or 1
            out[p] = [(v / total, shape, frozenset(m for m in model.split("|") if m) or None)
                      for (shape, model), v in top]
        return out

    def _occupy_running(self, r: RunningWorkload) -> None:
        cohort = self.cohorts.setdefault(r.pool, _Cohort(r.pool, []))
        shape = r.per_replica.as_tuple()
        cohort.add(r.project, _usage(r))
        pool = self.pools.get(r.pool)
        if pool is None:
            return
        g, c, m = shape
        done = []
        for entry in r.placement:
            n = pool.by_name.get(entry.get("node"))
            if n is None:
                continue
            gpus = entry.get("gpus")
            if gpus is None or any(not isinstance(i, int) or i >= n.ngpu or i < 0 for i in gpus):
                gpus = pool._gpus_for(n, g) if g else []
                if gpus is None:  # over-committed already (capacity shrank): take what is left
                    gpus = []
            pool.take(n, list(gpus), g, c, m)
            done.append((n, list(gpus)))
        self.allocs[r.id] = done

    def _release_running(self, r: RunningWorkload, sign: int = -1) -> None:
        """Give back (sign=-1) or take again (sign=1) what a running workload holds."""
        shape = r.per_replica.as_tuple()
        self.cohorts[r.pool].add(r.project, _usage(r), sign=sign)
        pool = self.pools.get(r.pool)
        if pool is None:
            return
        for n, gpus in self.allocs.get(r.id, []):
            pool.take(n, gpus, *shape, sign=sign)

    # Ordering. Work that fits in its project's nominal comes before work that would borrow (as
    # in Kueue: nominal is guaranteed, so a reclaim is not undone by a borrower taking the freed
    # resources back); then priority, then fair share, then submit time. Within a project, a
    # higher priority always goes first. Dynamic: shares change as the cycle admits.
    #
    # A workload requeued after a preemption is not considered before its preemptor while that
    # one is pending: otherwise a borrower could take back the very resources it was preempted
    # to free (ordered first because its project's head differs), and the preemptor would
    # preempt again, and again (preemption ping-pong). Its project's queue waits meanwhile.
    def _order(self) -> Iterable[PendingWorkload]:
        queues: dict[tuple[str, str], list[PendingWorkload]] = {}
        for w in self.snap.pending:
            queues.setdefault((w.pool, w.project), []).append(w)
        pending = {w.id for w in self.snap.pending}
        decided: set[int] = set()
        held: dict[int, list[tuple[str, str]]] = {}  # preemptor id -> queues waiting for it
        heap = []
        for key, items in queues.items():
            items.sort(key=lambda w: (w.priority, w.submitted_at, w.id), reverse=True)
            heap.append(self._entry(key, items[-1]))
        heapq.heapify(heap)
        while heap or held:
            if not heap:  # only holds left (preemptors waiting on each other): release them all
                for keys in held.values():
                    heap.extend(self._entry(k, queues[k][-1]) for k in keys)
                held.clear()
                pending = set()
                heapq.heapify(heap)
                continue
            key = heapq.heappop(heap)[-1]
            items = queues[key]
            by = items[-1].preempted_by
            if by is not None and by in pending and by not in decided and by != items[-1].id:
                held.setdefault(by, []).append(key)
                continue
            w = items.pop()
            yield w
            decided.add(w.id)
            if items:
                heapq.heappush(heap, self._entry(key, items[-1]))
            for k in held.pop(w.id, ()):
                heapq.heappush(heap, self._entry(k, queues[k][-1]))

    def _entry(self, key, w: PendingWorkload):
        cohort = self.cohorts.get(w.pool)
        q = cohort.quotas.get(w.project) if cohort is not None else None
        fresh = not self._starving(w)
        if q is None:
            return (True, fresh, w.priority, math.inf, w.submitted_at, w.id, key)
        share = self._shares.get(key)
        if share is None or share[0] != cohort.version:  # recomputed only when usage changed
            share = self._shares[key] = (cohort.version, q.share())
        r, used, nominal = w.per_replica, q.used, q.nominal
        borrows = (used[0] + r.gpu_milli * w.replicas > nominal[0] or used[1] + r.cpu_milli * w.replicas > nominal[1]
                   or used[2] + r.memory_mb * w.replicas > nominal[2])
        return (borrows, fresh, w.priority, share[1], w.submitted_at, w.id, key)

    def _starving(self, w: PendingWorkload) -> bool:
        limit = self.snap.starvation_seconds
        return (bool(limit) and self.now is not None and w.submitted_at is not None
                and w.preempted_by is None and (self.now - w.submitted_at).total_seconds() >= limit)

    # Memoised waits. A decision that changed nothing (a Wait with no preemption, claim or
    # reservation) is a pure function of the workload's class and of the pool's state; until that
    # state changes, the next workload of the same class gets the same reason without the work
    # (a long queue is mostly the same few shapes per project waiting for the same thing).
    def _class_key(self, w: PendingWorkload) -> tuple | None:
        if w.id in self.awaiting or not self.MEMO_WAITS:
            return None
        q = self.cohorts[w.pool].quotas.get(w.project) if w.pool in self.cohorts else None
        budget = w.expected_seconds if q is not None and q.hours_left is not None else None
        return (w.pool, w.project, w.priority, w.per_replica, w.replicas, w.gpu_model, budget)

    def _state(self, pool: str) -> tuple:
        return (self.cohorts[pool].version, self.pools[pool].changes, len(self.reserved_pools), len(self.victims))

    def run(self) -> list[Decision]:
        decisions: list[Decision] = []
        positions: dict[str, int] = {}
        memo: dict[tuple, tuple[tuple, str, str]] = {}
        for w in self._order():
            key = self._class_key(w)
            state = self._state(w.pool)
            hit = memo.get(key) if key is not None else None
            if hit is not None and hit[0] == state:
                reason, eta, kind = hit[1], None, hit[2]
            else:
                decision, preempts = self._decide(w)
                decisions.extend(preempts)
                if isinstance(decision, Admit):
                    decisions.append(decision)
                    continue
                reason, eta, kind = decision.reason, decision.estimated_start, decision.kind
                if key is not None and not preempts and eta is None and self._state(w.pool) == state:
                    memo[key] = (state, reason, kind)
            positions[w.pool] = position = positions.get(w.pool, 0) + 1
            decisions.append(Wait(w.id, reason, eta, position, kind))
        return decisions

    def _decide(self, w: PendingWorkload) -> tuple[Admit | Wait, list[Preempt]]:
        cohort = self.cohorts[w.pool]
        pool = self.pools[w.pool]
        shape = w.per_replica.as_tuple()
        need = tuple(x * w.replicas for x in shape)
        models = _models(w)
        if models is not None and not (models & pool.models):
            return Wait(w.id, f"constraint: pool '{w.pool}' has no schedulable node with GPU model "
                              f"{' or '.join(sorted(models))}", kind=WaitKind.CONSTRAINT), []
        if not pool.nodes:
            return Wait(w.id, f"capacity: pool '{w.pool}' has no schedulable node", kind=WaitKind.CAPACITY), []
        budget = cohort.budget_check(w.project, w, need[0])
        if budget:
            return Wait(w.id, budget, kind=WaitKind.BUDGET), []
        quota = cohort.check(w.project, need)
        if quota is None:
            done = self._try_place(pool, shape, w.replicas, models)
            if done is not None:
                cohort.add(w.project, need)
                cohort.charge_budget(w.project, w, need[0])
                return Admit(w.id, _placement(done)), []
        if w.id in self.awaiting:
            self._keep_claim(w, cohort, pool, shape, need, models)
            ids = ", ".join(str(i) for i in sorted(self.awaiting[w.id]))
            eta = max((r.expected_end for i in self.awaiting[w.id] if (r := self.running.get(i)) is not None
                       and r.expected_end is not None), default=None)
            return Wait(w.id, f"preempting: waiting for {len(self.awaiting[w.id])} preempted workload(s) ({ids}) "
                              f"to exit", eta, kind=WaitKind.PREEMPTING), []
        if self.snap.preemption:
            found = self._preempt(w, cohort, pool, shape, need, models)
            if found is not None:
                return found
        if quota is None and self.snap.reservations and w.pool not in self.reserved_pools:
            reserved = self._reserve(w, pool, shape, models)
            if reserved is not None:
                return reserved, []
        if quota is not None:
            return Wait(w.id, quota.reason, kind=quota.kind), []
        return Wait(w.id, self._capacity_reason(w, pool, models, shape), kind=WaitKind.CAPACITY), []

    def _try_place(self, pool: _Pool, shape, replicas, models):
        # Capacity only shrinks during a cycle (victims keep theirs until they exit, holds only
        # take), so a shape that failed once fails again: remember it.
        key = (pool.name, shape, replicas, models)
        if key in self.failed:
            return None
        done = pool.place_gang(shape, replicas, models)
        if done is None:
            self.failed.add(key)
        return done

    def _capacity_reason(self, w, pool: _Pool, models, shape) -> str:
        count, most = pool.free_summary(models)
        where = f" with GPU model {' or '.join(sorted(models))}" if models else ""
        reason = (f"capacity: pool '{w.pool}' cannot fit {w.replicas} replica(s) of {_fmt(shape)} at once"
                  f"{where}; the most free on one node is {_fmt(most)}")
        if shape[0] == 0 and pool.reserve and self._fits_without_reserve(w, pool, shape, models):
            reason += (f" (GPU nodes keep {pool.reserve:.0%} of their free GPUs' share of CPU and memory for GPU "
                       "work, which work without a GPU may not take)")
        return reason

    def _fits_without_reserve(self, w, pool: _Pool, shape, models) -> bool:
        """Whether CPU-only w would fit now if GPU nodes kept nothing for their free GPUs (the
        trial leaves the pool as it was, its change counter included: nothing changed)."""
        kept, changes = pool.reserve, pool.changes
        pool.reserve = 0.0
        try:
            trial = pool.place_gang(shape, w.replicas, models)
            if trial is not None:
                self._undo(pool, trial, shape)
        finally:
            pool.reserve, pool.changes = kept, changes
        return trial is not None

    # -- preemption ------------------------------------------------------------------------------

    def _fits(self, w, cohort: _Cohort, pool: _Pool, shape, need, models) -> bool:
        if cohort.check(w.project, need) is not None:
            return False
        trial = pool.place_gang(shape, w.replicas, models)
        if trial is None:
            return False
        self._undo(pool, trial, shape)
        return True

    def _preempt(self, w, cohort: _Cohort, pool: _Pool, shape, need, models):
        in_nominal = cohort.within_nominal(w.project, need)
        # Victim sets only shrink and claims only grow during a cycle: a failed search stays failed.
        key = (w.pool, w.project, w.priority, shape, w.replicas, models, in_nominal)
        if key in self.preempt_failed:
            return None
        own = [(1, -r.priority, -_ts(r.admitted_at), -r.id, r) for r in self.candidates.get((w.pool, w.project), ())
               if r.priority > w.priority and r.id not in self.victims]
        if in_nominal:
            # Reclaim: other projects' borrowed work, whatever its priority.
            chosen = self._victims(w, cohort, pool, shape, need, models, own + self._borrowed(w, cohort, need))
        else:
            # Beyond its nominal a workload preempts its own project's lower priority work. Where it
            # would, it takes instead, if that is enough, lower priority work that other projects
            # run on borrowed quota (as Kueue's borrowWithinCohort): that quota is lent, not owned,
            # and the project keeps what it runs within its own. Only as a substitute: where its
            # own work would not do, it preempts nothing (and the search stays as cheap as that).
            chosen = self._victims(w, cohort, pool, shape, need, models, own)
            if chosen is not None:
                lent = self._borrowed(w, cohort, need, below=w.priority)
                if lent:
                    chosen = self._victims(w, cohort, pool, shape, need, models, own + lent) or chosen
        if chosen is None:
            self.preempt_failed.add(key)
            return None
        self._plan_and_hold(w, pool, shape, models, chosen)
        # Later workloads cannot take its quota (beyond what the victims give back).
        cohort.claim(w.project, need, freed=[(r.project, _usage(r)) for r in chosen])
        for r in chosen:
            self.victims.add(r.id)
        names = ", ".join(str(r.id) for r in chosen)
        if not any(r.project != w.project for r in chosen):
            why = "higher priority"
        else:
            why = "quota reclaim" if in_nominal else "higher priority, on borrowed quota"
        preempts = [Preempt(r.id, w.id, f"Preempted by workload {w.id} ({why}, P{w.priority}).") for r in chosen]
        eta = self.now + timedelta(seconds=self.snap.grace_seconds) if self.now else None
        return Wait(w.id, f"preempting: waiting for {len(chosen)} preempted workload(s) ({names}) to exit",
                    eta, kind=WaitKind.PREEMPTING), preempts

    def _borrowed(self, w, cohort: _Cohort, need, below: int | None = None) -> list[tuple]:
        """Preemption candidates among other projects' work while those projects borrow what w
        needs (of lower priority than `below` if given); recently re-admitted victims are spared
        (anti-thrash)."""
        protected_since = self._protected_since()
        out = []
        for project in sorted(cohort.borrowers):
            if project == w.project:
                continue
            for r in self.candidates.get((w.pool, project), ()):
                if r.id in self.victims or (below is not None and r.priority <= below):
                    continue
                if not cohort.runs_borrowed(project, r.per_replica.as_tuple(), need):
                    continue
                if (protected_since is not None and r.preemptions and r.admitted_at is not None
                        and r.admitted_at > protected_since):
                    continue  # preempted before and re-admitted too recently: not again yet
                out.append((0, -r.priority, -_ts(r.admitted_at), -r.id, r))
        return out

    def _victims(self, w, cohort: _Cohort, pool: _Pool, shape, need, models, candidates) -> list | None:
        """The minimal set of candidates whose exit lets w fit (quota and placement), or None.
        Leaves the cycle's state as it found it."""
        if not candidates:
            return None
        # Cheap bound first: even all candidates together may not free enough GPUs.
        releasable = sum(c[4].per_replica.gpu_milli * len(c[4].placement) for c in candidates)
        if pool.free_gpu + releasable < need[0]:
            return None
        # Borrowers first, then the lowest priority, then the most recently admitted (then submitted).
        candidates = sorted(candidates, key=lambda c: c[:4])
        chosen: list[RunningWorkload] = []
        fits = False
        for *_, r in candidates:
            if r.project != w.project and not cohort.runs_borrowed(r.project, r.per_replica.as_tuple(), need):
                continue  # no longer borrowing after earlier victims: reclaim stops at its nominal
            self._release_running(r)
            chosen.append(r)
            if (pool.free_gpu >= need[0] and cohort.check(w.project, need) is None
                    and self._fits(w, cohort, pool, shape, need, models)):
                fits = True
                break
        if not fits:
            for r in reversed(chosen):
                self._release_running(r, sign=1)
            return None
        # Minimal set: give back every victim that turns out not to be needed.
        for r in list(reversed(chosen)):
            self._release_running(r, sign=1)
            if self._fits(w, cohort, pool, shape, need, models):
                chosen.remove(r)
            else:
                self._release_running(r)
        for r in chosen:
            self._release_running(r, sign=1)
        return chosen

    def _keep_claim(self, w, cohort: _Cohort, pool: _Pool, shape, need, models) -> bool:
        """A preemptor whose victims are still exiting keeps, for the rest of the cycle, the quota
        and the placement it will get once they are gone (as on the cycle it preempted them), so
        work ordered after it cannot take them in the meantime (and force another preemption)."""
        victims = [r for i in self.awaiting[w.id] if (r := self.running.get(i)) is not None]
        for r in victims:
            self._release_running(r)
        fits = cohort.check(w.project, need) is None
        for r in reversed(victims):
            self._release_running(r, sign=1)
        if not fits or not self._plan_and_hold(w, pool, shape, models, victims):
            return False
        cohort.claim(w.project, need, freed=[(r.project, _usage(r)) for r in victims])
        return True

    def _protected_since(self) -> datetime | None:
        """Workloads preempted before and re-admitted after this time are not reclaimed (None: no
        protection)."""
        if not self.snap.repreempt_min_runtime_seconds or self.now is None:
            return None
        return self.now - timedelta(seconds=self.snap.repreempt_min_runtime_seconds)

    def _undo(self, pool: _Pool, done, shape) -> None:
        for n, gpus in done:
            pool.take(n, gpus, *shape, sign=-1)

    def _plan_and_hold(self, w, pool: _Pool, shape, models, released: list[RunningWorkload]) -> bool:
        """Plan w's placement on the state where `released` have left, then keep free only what is
        free both now and after that plan (per GPU, CPU and memory): the plan's share is held."""
        for r in released:
            self._release_running(r)
        plan = pool.place_gang(shape, w.replicas, models)
        touched = {n.idx: n for n, _ in plan or []}
        for r in released:
            touched.update((n.idx, n) for n, _ in self.allocs.get(r.id, []))
        after = {i: (list(n.gpus), n.cpu, n.mem) for i, n in touched.items()}
        if plan is not None:
            self._undo(pool, plan, shape)
        for r in reversed(released):
            self._release_running(r, sign=1)
        if plan is None:
            return False
        for i, n in touched.items():
            gpus, cpu, mem = after[i]
            n.gpus = [min(a, b) for a, b in zip(n.gpus, gpus, strict=True)]
            n.cpu = min(n.cpu, cpu)
            n.mem = min(n.mem, mem)
            pool._reindex(n)
            pool.changes += 1
        return True

    # -- reservation (backfill) ------------------------------------------------------------------

    def _reserve(self, w, pool: _Pool, shape, models) -> Wait | None:
        """Hold, for the first capacity-blocked workload of the pool, the resources it will get
        when running workloads end (earliest expected end first); smaller work backfills around."""
        cohort = self.cohorts[w.pool]
        need = tuple(x * w.replicas for x in shape)
        pending_release = sorted(
            (r for r in self.running.values() if r.pool == w.pool and r.id not in self.victims),
            key=lambda r: (r.expected_end is None, r.expected_end or datetime.max, r.id),
        )
        released: list[RunningWorkload] = []
        found = False
        step = 1
        i = 0
        while i < len(pending_release):
            batch = pending_release[i:i + step]
            i += len(batch)
            for r in batch:
                self._release_running(r)
            released.extend(batch)
            trial = pool.place_gang(shape, w.replicas, models)
            if trial is not None:
                self._undo(pool, trial, shape)
                found = True
                break
            step = min(step * 2, 64)
        for r in reversed(released):
            self._release_running(r, sign=1)
        if not found:
            return None
        # Shrink the last batch to the exact workload whose end makes it fit.
        while len(released) > 1:
            last = released.pop()
            for r in released:
                self._release_running(r)
            trial = pool.place_gang(shape, w.replicas, models)
            if trial is not None:
                self._undo(pool, trial, shape)
            for r in reversed(released):
                self._release_running(r, sign=1)
            if trial is None:
                released.append(last)
                break
        if not self._plan_and_hold(w, pool, shape, models, released):
            return None
        self.reserved_pools.add(w.pool)
        cohort.claim(w.project, need, freed=[(r.project, _usage(r)) for r in released])
        ends = [r.expected_end for r in released]
        eta = max(ends) if ends and all(e is not None for e in ends) else None
        when = f" (expected at {eta.isoformat(timespec='seconds')})" if eta else ""
        return Wait(w.id, f"reserved: pool '{w.pool}' is full for {w.replicas} replica(s) of {_fmt(shape)}; "
                          f"capacity is reserved for it as {len(released)} running workload(s) end{when}, "
                          f"and smaller work backfills around it", eta, kind=WaitKind.RESERVED)


def _usage(r: RunningWorkload) -> tuple[int, int, int]:
    return tuple(x * len(r.placement) for x in r.per_replica.as_tuple())


def _ts(t: datetime | None) -> float:
    return t.timestamp() if t is not None else 0.0


def schedule(snapshot: Snapshot) -> list[Decision]:
    """One scheduling cycle: a decision for every pending workload, plus preemptions."""
    return _Cycle(snapshot).run()


__all__ = [
    "Admit", "Decision", "NodeState", "PendingWorkload", "Preempt", "QuotaState", "Resources", "RunningWorkload",
    "Snapshot", "Wait", "schedule", "timedelta",
]
