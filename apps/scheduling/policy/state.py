"""The cycle's working state, given to the ordering, preemption, backfill and reasons parts: the
pools' free capacity and the cohorts' usage with running work applied, and the moves they all make
on it (release or retake a running workload, try, undo and hold placements)."""
from __future__ import annotations

from .cluster import ClusterState, schedulable_by_pool
from .placement import FreeNode, Pool, placed_gpus_valid
from .quota import Cohort
from .snapshot import PolicyOptions, QuotaState, RunningWorkload, Snapshot


class CycleState:
    """One scheduling cycle's mutable view of the snapshot (`Cycle` in cycle.py gives it to each part).

    `cluster`: the free capacity kept between cycles (cluster.py); it is brought up to date from
    the snapshot and the cycle starts from a copy of it. Without one (or when it cannot serve this
    snapshot) the pools are rebuilt from the nodes and the running work; the decisions are the same."""

    def __init__(self, snapshot: Snapshot, options: PolicyOptions, cluster: ClusterState | None = None):
        self.snap = snapshot
        self.options = options
        self.now = snapshot.now
        nodes_by_pool = schedulable_by_pool(snapshot.nodes)
        kept = cluster is not None and cluster.sync(snapshot, nodes_by_pool)
        mix = self._mix(snapshot)
        pools = {w.pool for w in snapshot.pending} | set(nodes_by_pool)
        if kept:
            self.pools = {p: cluster.pool_for_cycle(p, mix.get(p, []), options) for p in pools}
        else:
            self.pools = {p: Pool(p, nodes_by_pool.get(p, []), mix.get(p, []), options.gpu_node_reserve, options)
                          for p in pools}
        quotas_by_pool: dict[str, list[QuotaState]] = {}
        for q in snapshot.quotas:
            quotas_by_pool.setdefault(q.pool, []).append(q)
        self.cohorts = {p: Cohort(p, quotas_by_pool.get(p, [])) for p in pools | set(quotas_by_pool)}
        self.running = {r.id: r for r in snapshot.running}
        self.candidates: dict[tuple[str, str], list[RunningWorkload]] = {}
        for r in snapshot.running:
            if r.preemptible and not r.stopping:
                self.candidates.setdefault((r.pool, r.project), []).append(r)
        self.allocs: dict[int, list[tuple[FreeNode, list[int]]]] = {}
        if kept:
            for r in snapshot.running:
                self._occupy_kept(r, cluster)
        else:
            for r in snapshot.running:
                self._occupy_running(r)
            for pool in self.pools.values():
                pool.canonical()  # node order, as a kept pool's copy starts (see Pool.canonical)
        self._moves: dict[int, tuple] = {}  # release_running's, per running workload
        self.victims: set[int] = set()
        # Pending workloads whose victims are still exiting: they wait for those, and preempt no more.
        # By id, whatever order the running work came in.
        self.awaiting: dict[int, list[int]] = {}
        for r in snapshot.running:
            if r.stopping and r.preempted_for is not None:
                self.awaiting.setdefault(r.preempted_for, []).append(r.id)
        for ids in self.awaiting.values():
            ids.sort()
        self.reserved_pools: set[str] = set()
        self.failed: set[tuple] = set()

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

    def _cohort(self, pool: str) -> Cohort:
        cohort = self.cohorts.get(pool)
        if cohort is None:
            cohort = self.cohorts[pool] = Cohort(pool, [])
        return cohort

    def _occupy_kept(self, r: RunningWorkload, cluster: ClusterState) -> None:
        """As _occupy_running, with the pools' free capacity already taken from the kept cluster:
        the quota usage, and what r holds on this cycle's copies of the nodes."""
        self._cohort(r.pool).add(r.project, usage(r))
        pool = self.pools.get(r.pool)
        if pool is not None:
            nodes = pool.nodes
            self.allocs[r.id] = [(nodes[i], gpus) for i, gpus in cluster.allocs.get(r.id, ())]

    def _occupy_running(self, r: RunningWorkload) -> None:
        cohort = self._cohort(r.pool)
        shape = r.per_replica.as_tuple()
        cohort.add(r.project, usage(r))
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
            if not placed_gpus_valid(gpus, n):
                gpus = pool._gpus_for(n, g) if g else []
                if gpus is None:  # over-committed already (capacity shrank): take what is left
                    gpus = []
            pool.take(n, list(gpus), g, c, m)
            done.append((n, list(gpus)))
        self.allocs[r.id] = done

    def release_running(self, r: RunningWorkload, sign: int = -1) -> None:
        """Give back (sign=-1) or take again (sign=1) what a running workload holds."""
        # The victim searches release and retake the same few workloads many times: what a move
        # touches is worked out once per workload (its allocations are fixed once the state is set up).
        moves = self._moves.get(r.id)
        if moves is None:
            moves = self._moves[r.id] = (self.cohorts[r.pool], r.project, usage(r), self.pools.get(r.pool),
                                         self.allocs.get(r.id, ()), *r.per_replica.as_tuple())
        cohort, project, used, pool, allocs, g, c, m = moves
        cohort.add(project, used, sign)
        if pool is None:
            return
        take = pool.take
        for n, gpus in allocs:
            take(n, gpus, g, c, m, sign)

    def try_place(self, pool: Pool, shape, replicas, models):
        # Capacity only shrinks during a cycle (victims keep theirs until they exit, holds only
        # take), so a shape that failed once fails again: remember it.
        key = (pool.name, shape, replicas, models)
        if key in self.failed:
            return None
        done = pool.place_gang(shape, replicas, models)
        if done is None:
            self.failed.add(key)
        return done

    def undo(self, pool: Pool, done, shape) -> None:
        for n, gpus in done:
            pool.take(n, gpus, *shape, sign=-1)

    def plan_and_hold(self, w, pool: Pool, shape, models, released: list[RunningWorkload]) -> bool:
        """Plan w's placement on the state where `released` have left, then keep free only what is
        free both now and after that plan (per GPU, CPU and memory): the plan's share is held."""
        for r in released:
            self.release_running(r)
        plan = pool.place_gang(shape, w.replicas, models)
        touched = {n.idx: n for n, _ in plan or []}
        for r in released:
            touched.update((n.idx, n) for n, _ in self.allocs.get(r.id, []))
        after = {i: (list(n.gpus), n.cpu, n.mem) for i, n in touched.items()}
        if plan is not None:
            self.undo(pool, plan, shape)
        for r in reversed(released):
            self.release_running(r, sign=1)
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


def usage(r: RunningWorkload) -> tuple[int, int, int]:
    n, per = len(r.placement), r.per_replica
    return (per.gpu_milli * n, per.cpu_milli * n, per.memory_mb * n)
