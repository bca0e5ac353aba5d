"""Sharing incentive: finish-time fairness per project, in the simulator.

A project's finish-time fairness is rho = T_shared / T_alone (Themis, Mahajan et al., NSDI '20):
the time its jobs spent in the system (arrival to finish, summed over the jobs) on the shared
cluster, against the time the same jobs spend alone on a partition equal to the project's nominal
quota. rho <= 1: the project did no worse sharing the cluster than it would have on its guaranteed
share alone, the sharing incentive of DRF (Ghodsi et al., NSDI '11).

The partition is the project's share s of the pool (its nominal GPUs over the pool's) of every GPU
model: s of each model's GPUs, with the CPU and memory that come with them on their nodes, packed
onto as few of the model's nodes as it fills (a slice of the cluster carved out of whole nodes where
it can be). Its last node of a model may hold a fraction of a GPU (s of 4 P100s with s = 1/12 is a
third of one): a placeholder workload that never ends holds the rest of that GPU, so the project's
fractional pods may use the fraction and whole-GPU pods may not. A quota over all nodes instead
(any model) would give every project alone all of a scarce model that no sharing can give them all.

The project's jobs are replayed alone on it with the same policy and simulator. A job the empty
partition cannot hold (more GPUs than the partition has of the models it may use, or a replica
bigger than any of its nodes) could never start there; it runs as the partition would time-slice
it, stretched: one replica on the largest node it may use, asking 1/f of its resources (all replicas
together) for f times as long, f as small as fits (the same GPU-seconds, at the partition's rate)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .policy import GPU, NodeState, QuotaState, Resources
from .simulation import SimJob, simulate

PLACEHOLDER = "~partition"  # the project of the placeholders that hold the rest of a fractional GPU
NEVER = 1e11  # the placeholders' run time (seconds, some 3,000 years): they outlast any replay


def finish_time_fairness(arrival: Mapping[int, float], shared: Mapping[int, float], alone: Mapping[int, float],
                         project_of: Mapping[int, str]) -> dict[str, float]:
    """rho per project: sum over its jobs of (shared finish - arrival) / sum of (alone finish - arrival).

    `arrival`, `shared`, `alone`: job id -> arrival time, finish time on the shared cluster, finish
    time alone on the project's partition; `project_of`: job id -> project. Jobs that did not finish
    in both runs are left out (a job still running has no time in the system yet); a project with
    no time alone (no job of it finished in both) has no rho."""
    spent_shared: dict[str, float] = {}
    spent_alone: dict[str, float] = {}
    for job, project in project_of.items():
        if job not in shared or job not in alone:
            continue
        spent_shared[project] = spent_shared.get(project, 0.0) + shared[job] - arrival[job]
        spent_alone[project] = spent_alone.get(project, 0.0) + alone[job] - arrival[job]
    return {p: spent_shared[p] / spent_alone[p] for p in sorted(spent_shared) if spent_alone[p] > 0}


@dataclass(frozen=True)
class Slice:
    """One node of a partition: `node` (its model key made unique, `model@name`, so that work can be
    sent to it) and the GPU milli its last GPU keeps for the project (GPU: none held back)."""

    node: NodeState
    model: str  # the node's own GPU model
    last_gpu: int = GPU

    @property
    def whole(self) -> int:
        """Whole GPUs free for the project."""
        return self.node.allocatable.gpu_milli // GPU - (self.last_gpu < GPU)

    def placeholder(self) -> Resources | None:
        """What the placeholder on this node holds: the rest of its last GPU and that part of the CPU and memory."""
        if self.last_gpu >= GPU:
            return None
        a, held = self.node.allocatable, GPU - self.last_gpu
        return Resources(held, a.cpu_milli * held // a.gpu_milli, a.memory_mb * held // a.gpu_milli)

    def free(self) -> tuple[int, int, int]:
        """GPU milli, CPU milli and memory the project has of the node (the placeholder's part left out)."""
        a, held = self.node.allocatable, self.placeholder() or Resources()
        return a.gpu_milli - held.gpu_milli, a.cpu_milli - held.cpu_milli, a.memory_mb - held.memory_mb


def partition(nodes: Iterable[NodeState], share: float) -> list[Slice]:
    """The project's slice of the pool: `share` of every GPU model's GPUs (and of the CPU and memory
    that come with them), filling the model's nodes one after the other in node order."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], not {share!r}")
    by_model: dict[str, list[NodeState]] = {}
    for n in nodes:
        if n.schedulable and n.allocatable.gpu_milli:
            by_model.setdefault(n.gpu_model, []).append(n)
    slices = []
    for model, mine in by_model.items():
        left = round(share * sum(n.allocatable.gpu_milli for n in mine))
        for n in mine:
            if left <= 0:
                break
            a = n.allocatable
            take = min(left, a.gpu_milli)
            left -= take
            gpus = -(-take // GPU)  # whole GPUs on the node, the last one maybe in part
            node = replace(n, gpu_model=f"{model}@{n.name}",
                           allocatable=Resources(gpus * GPU, a.cpu_milli * gpus * GPU // a.gpu_milli,
                                                 a.memory_mb * gpus * GPU // a.gpu_milli))
            slices.append(Slice(node=node, model=model, last_gpu=take - (gpus - 1) * GPU))
    return slices


def _holds(s: Slice, ask: tuple[int, int, int]) -> int:
    """How many replicas asking `ask` the empty slice holds."""
    g, cpu, mem = ask
    _, free_cpu, free_mem = s.free()
    room = [free_cpu // cpu if cpu else math.inf, free_mem // mem if mem else math.inf]
    if g >= GPU:
        room.append(s.whole // -(-g // GPU))
    elif g:
        room.append(s.whole * (GPU // g) + (s.last_gpu // g if s.last_gpu < GPU else 0))
    return min(room)


def _allowed(job: SimJob, slices: list[Slice]) -> list[Slice]:
    models = {m for m in job.gpu_model.split("|") if m}
    return [s for s in slices if not models or s.model in models]


def on_partition(job: SimJob, slices: list[Slice]) -> SimJob:
    """The job as it runs alone on the partition: its allowed models named by the slices' keys, and,
    if the empty partition cannot hold all its replicas at once, stretched: one replica on the
    slice it may use that needs the least stretch, asking 1/f of all it asks for f times as long."""
    allowed = _allowed(job, slices)
    if not allowed:
        raise ValueError(f"job {job.id}: the partition has no node of model {job.gpu_model!r}")
    keys = "|".join(s.node.gpu_model for s in allowed) if job.gpu_model else ""
    ask = job.per_replica.as_tuple()
    if sum(_holds(s, ask) for s in allowed) >= job.replicas:
        return replace(job, gpu_model=keys)
    total = [x * job.replicas for x in ask]

    def room(s: Slice) -> tuple[int, int, int]:
        _, cpu, mem = s.free()
        return (s.whole * GPU if s.whole else s.last_gpu) if total[0] else 0, cpu, mem

    def stretch(s: Slice) -> float:
        return max(t / r if r else (math.inf if t else 0.0) for t, r in zip(total, room(s), strict=True))

    best = min(allowed, key=stretch)
    f = stretch(best)
    if math.isinf(f):
        raise ValueError(f"job {job.id} asks for a resource its partition has none of")
    f = max(f, 1.0)
    per_replica = Resources(*(min(r, math.ceil(t / f)) for t, r in zip(total, room(best), strict=True)))
    return replace(job, per_replica=per_replica, replicas=1, duration=job.duration * f, gpu_model=keys)


def alone_finish_times(*, nodes: list[NodeState], quotas: Iterable[QuotaState], jobs: Iterable[SimJob],
                       **options) -> dict[int, float]:
    """Job id -> finish time of every job run alone on its project's partition (one replay per
    project, through `simulate` with `options`, e.g. policy, known_durations)."""
    quotas = list(quotas)
    by_project: dict[str, list[SimJob]] = {}
    for j in jobs:
        by_project.setdefault(j.project, []).append(j)
    pool_gpus = sum(n.allocatable.gpu_milli for n in nodes if n.schedulable)
    nominal = {q.project: q for q in quotas}
    finish: dict[int, float] = {}
    for project, mine in sorted(by_project.items()):
        q = nominal[project]
        slices = partition(nodes, q.nominal.gpu_milli / pool_gpus)
        first = min(j.arrival for j in mine)
        held = [(s, r) for s in slices if (r := s.placeholder()) is not None]
        placeholders = [SimJob(id=-(i + 1), project=PLACEHOLDER, arrival=first, duration=NEVER, per_replica=r,
                               priority=0, gpu_model=s.node.gpu_model, preemptible=False, pool=q.pool)
                        for i, (s, r) in enumerate(held)]
        size = [sum(s.free()[d] for s in slices) for d in range(3)]
        kept = [sum(r.as_tuple()[d] for _, r in held) for d in range(3)]
        quotas_alone = [replace(q, nominal=Resources(*size), borrowing_limit_gpu_milli=0, lending_limit_gpu_milli=None,
                                gpu_hour_budget=None)]
        if placeholders:
            quotas_alone.append(QuotaState(project=PLACEHOLDER, pool=q.pool, nominal=Resources(*kept),
                                           borrowing_limit_gpu_milli=0))
        result = simulate(nodes=[s.node for s in slices], quotas=quotas_alone,
                          jobs=placeholders + [on_partition(j, slices) for j in mine], **options)
        finish.update((i, t) for i, t in result.finish_times.items() if i > 0)
    return finish


def project_rho(*, nodes: list[NodeState], quotas: list[QuotaState], jobs: list[SimJob], shared_finish: Mapping[int, float],
                **options) -> dict[str, float]:
    """rho per project of a replay whose finish times were `shared_finish`, its partitions replayed
    with `options` (the same as the shared replay's, for the same policy)."""
    alone = alone_finish_times(nodes=nodes, quotas=quotas, jobs=jobs, **options)
    return finish_time_fairness({j.id: j.arrival for j in jobs}, shared_finish, alone, {j.id: j.project for j in jobs})


__all__ = ["Slice", "alone_finish_times", "finish_time_fairness", "on_partition", "partition", "project_rho"]
