"""The scheduling policy: a pure function over plain data (no ORM, no I/O).

This first policy admits pending workloads in priority order (P0 first), then submit order,
when the project's quota in the pool and the pool's free capacity both allow; a gang of N
replicas is placed all at once or not at all. The full scheduler (borrowing, budgets,
preemption, topology, backfill) replaces it behind the same interface.
"""
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Resources:
    gpu_milli: int = 0
    cpu_milli: int = 0
    memory_mb: int = 0

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(self.gpu_milli + other.gpu_milli, self.cpu_milli + other.cpu_milli,
                         self.memory_mb + other.memory_mb)

    def __sub__(self, other: "Resources") -> "Resources":
        return Resources(self.gpu_milli - other.gpu_milli, self.cpu_milli - other.cpu_milli,
                         self.memory_mb - other.memory_mb)

    def times(self, n: int) -> "Resources":
        return Resources(self.gpu_milli * n, self.cpu_milli * n, self.memory_mb * n)

    def fits_in(self, other: "Resources") -> bool:
        return (self.gpu_milli <= other.gpu_milli and self.cpu_milli <= other.cpu_milli
                and self.memory_mb <= other.memory_mb)


@dataclass
class NodeState:
    name: str
    pool: str
    free: Resources
    gpu_model: str = ""
    schedulable: bool = True


@dataclass
class QuotaState:
    project: str
    pool: str
    nominal: Resources
    used: Resources = field(default_factory=Resources)


@dataclass(frozen=True)
class PendingWorkload:
    id: int
    project: str
    pool: str
    priority: int  # 0 (P0) is the highest
    submitted_at: datetime
    replicas: int
    per_replica: Resources
    gpu_model: str = ""


@dataclass(frozen=True)
class Admit:
    workload_id: int
    placement: list[dict]  # one {"replica": i, "node": name} per replica


@dataclass(frozen=True)
class Wait:
    workload_id: int
    reason: str


@dataclass
class Snapshot:
    nodes: list[NodeState]
    quotas: list[QuotaState]
    pending: list[PendingWorkload]


def _fmt(r: Resources) -> str:
    return f"{r.gpu_milli / 1000:g} GPU, {r.cpu_milli / 1000:g} CPU, {r.memory_mb / 1024:g} GiB"


def _quota_shortfall(quota: QuotaState, need: Resources) -> str | None:
    available = quota.nominal - quota.used
    checks = (
        (need.gpu_milli, available.gpu_milli, quota.nominal.gpu_milli, 1000, "GPU"),
        (need.cpu_milli, available.cpu_milli, quota.nominal.cpu_milli, 1000, "CPU"),
        (need.memory_mb, available.memory_mb, quota.nominal.memory_mb, 1024, "GiB of memory"),
    )
    for needed, free, nominal, scale, unit in checks:
        if needed > free:
            return (f"quota: project '{quota.project}' has {max(free, 0) / scale:g} of {nominal / scale:g} {unit} "
                    f"free on pool '{quota.pool}'; this workload needs {needed / scale:g}")
    return None


def _place(workload: PendingWorkload, nodes: list[NodeState]) -> list[dict] | None:
    """First fit of every replica, on a scratch copy of free capacity; None if the gang does not fit."""
    free = {node.name: node.free for node in nodes}
    placement = []
    for replica in range(workload.replicas):
        for node in nodes:
            if workload.per_replica.fits_in(free[node.name]):
                free[node.name] = free[node.name] - workload.per_replica
                placement.append({"replica": replica, "node": node.name})
                break
        else:
            return None
    for node in nodes:
        node.free = free[node.name]
    return placement


def _capacity_reason(workload: PendingWorkload, nodes: list[NodeState]) -> str:
    if not nodes:
        constraint = f" with GPU model '{workload.gpu_model}'" if workload.gpu_model else ""
        return f"capacity: pool '{workload.pool}' has no schedulable node{constraint}"
    biggest = max((n.free for n in nodes), key=lambda r: (r.gpu_milli, r.cpu_milli, r.memory_mb))
    return (f"capacity: pool '{workload.pool}' cannot fit {workload.replicas} replica(s) of "
            f"{_fmt(workload.per_replica)} at once; the most free on one node is {_fmt(biggest)}")


def schedule(snapshot: Snapshot) -> list[Admit | Wait]:
    """One scheduling cycle. Returns a decision for every pending workload."""
    quotas = {(q.project, q.pool): q for q in snapshot.quotas}
    nodes_by_pool: dict[str, list[NodeState]] = {}
    for node in snapshot.nodes:
        if node.schedulable:
            nodes_by_pool.setdefault(node.pool, []).append(node)
    decisions: list[Admit | Wait] = []
    for workload in sorted(snapshot.pending, key=lambda w: (w.priority, w.submitted_at, w.id)):
        quota = quotas.get((workload.project, workload.pool))
        if quota is None:
            decisions.append(Wait(workload.id, f"quota: project '{workload.project}' has no quota on pool "
                                               f"'{workload.pool}'"))
            continue
        need = workload.per_replica.times(workload.replicas)
        shortfall = _quota_shortfall(quota, need)
        if shortfall:
            decisions.append(Wait(workload.id, shortfall))
            continue
        candidates = [n for n in nodes_by_pool.get(workload.pool, [])
                      if not workload.gpu_model or n.gpu_model == workload.gpu_model]
        placement = _place(workload, candidates)
        if placement is None:
            decisions.append(Wait(workload.id, _capacity_reason(workload, candidates)))
            continue
        quota.used = quota.used + need
        decisions.append(Admit(workload.id, placement))
    return decisions
