"""The cluster kept between cycles: each pool's free capacity with the running work applied, and
what each running workload holds, brought up to date from one snapshot to the next by the
changes (deltas) instead of rebuilt.

A cycle starts from the pools' free capacity after every running workload has taken its share.
Rebuilt, that is every schedulable node at its allocatable capacity and a `take` per replica of
every running workload. `ClusterState` keeps the result, and `sync(snapshot)` brings it to the new
snapshot by what changed since the last one:

- a workload that is no longer running (finished, or a victim that exited) gives back what it held;
- a workload that is new (admitted) takes its placement; one whose placement, size or pool
  changed does both;
- a pool whose schedulable nodes changed (a node added, removed, cordoned, resized, relabelled)
  is rebuilt from its nodes and the running work on it.

The cycle then works on copies (`Pool.copy`), indexed afresh in node order (`Pool.canonical`),
exactly as a rebuilt pool is: the decisions are the same whether the state was kept or rebuilt
(tests/scheduling/test_cluster_state.py checks it over random sequences of admissions, ends,
preemptions and node changes).

The safe fallback: a running workload whose placement names no valid GPU indices on a node of the
pool (its GPUs are then chosen by the order running work is applied in, which a kept state cannot
repeat) makes `sync` answer False; the cycle rebuilds its own state from the snapshot, and the
kept one is rebuilt at the next `sync`. Deltas are not taken on trust: `sync` compares the kept
running set and nodes with the snapshot's, so a change the caller did not report (a finish seen
by another process, an admission whose write failed) is applied anyway.
"""
from __future__ import annotations

from .placement import Pool, placed_gpus_valid
from .snapshot import NodeState, PolicyOptions, RunningWorkload, Snapshot


class ClusterState:
    """Free capacity kept between cycles (see the module docstring). Not thread-safe; one per
    scheduler loop (or simulated replay)."""

    def __init__(self) -> None:
        self.nodes: dict[str, list[NodeState]] = {}  # per pool, its schedulable nodes in snapshot order
        self.pools: dict[str, Pool] = {}
        self.running: dict[int, RunningWorkload] = {}
        self.allocs: dict[int, list[tuple[int, list[int]]]] = {}  # workload id -> (node index, GPU indices)
        self.built = False
        # What sync did, for tests and benchmarks: full rebuilds, pools rebuilt for node changes,
        # workloads released and applied as deltas, snapshots the kept state could not serve.
        self.stats = {"rebuilds": 0, "pool_rebuilds": 0, "released": 0, "applied": 0, "fallbacks": 0}

    def sync(self, snapshot: Snapshot, nodes_by_pool: dict[str, list[NodeState]] | None = None) -> bool:
        """Bring the kept state to `snapshot`; True if a cycle may start from it."""
        if nodes_by_pool is None:
            nodes_by_pool = schedulable_by_pool(snapshot.nodes)
        if not self.built:
            return self._rebuild(nodes_by_pool, snapshot.running)
        now = {r.id: r for r in snapshot.running}
        ended = [i for i, r in self.running.items() if _moved(r, now.get(i))]
        added = [r for r in snapshot.running if _moved(self.running.get(r.id), r)]
        changed_pools = {p for p in nodes_by_pool.keys() | self.nodes.keys()
                         if not _same_nodes(nodes_by_pool.get(p, ()), self.nodes.get(p, ()))}
        for i in ended:
            r = self.running.pop(i)
            if r.pool not in changed_pools:
                self._release(r)
            self.allocs.pop(i, None)
            self.stats["released"] += 1
        for p in changed_pools:
            self.nodes[p] = list(nodes_by_pool.get(p, ()))
            if not self.nodes[p]:
                del self.nodes[p]
                self.pools.pop(p, None)
            else:
                self.pools[p] = Pool(p, self.nodes[p], [])
            self.stats["pool_rebuilds"] += 1
        ok = True
        for r in added:
            self.running[r.id] = r
            if r.pool not in changed_pools:
                ok = self._occupy(r) and ok
                self.stats["applied"] += 1
        for r in self.running.values():
            if r.pool in changed_pools:  # re-apply, ids as they come (sums: the order does not matter)
                ok = self._occupy(r) and ok
        # Workloads that stayed keep their record (a victim turning `stopping` is a new record with
        # the same placement: what it holds is unchanged).
        for r in snapshot.running:
            self.running[r.id] = r
        if not ok:
            self.built = False
            self.stats["fallbacks"] += 1
        return ok

    def pool_for_cycle(self, name: str, mix: list[tuple], options: PolicyOptions) -> Pool:
        """A copy of the kept pool for one cycle (an empty pool for a pool with no schedulable node),
        tuned by the cycle's options."""
        kept = self.pools.get(name)
        if kept is None:
            return Pool(name, [], mix, options.gpu_node_reserve, options)
        return kept.copy(mix, options.gpu_node_reserve, options)

    def _rebuild(self, nodes_by_pool: dict[str, list[NodeState]], running: list[RunningWorkload]) -> bool:
        self.nodes = {p: list(nodes) for p, nodes in nodes_by_pool.items() if nodes}
        self.pools = {p: Pool(p, nodes, []) for p, nodes in self.nodes.items()}
        self.running = {r.id: r for r in running}
        self.allocs = {}
        ok = True
        for r in running:
            ok = self._occupy(r) and ok
        self.built = ok
        self.stats["rebuilds"] += 1
        if not ok:
            self.stats["fallbacks"] += 1
        return ok

    def _occupy(self, r: RunningWorkload) -> bool:
        """Apply what r holds to its pool; False if a placement entry on a node of the pool has no
        valid GPU indices (the kept state cannot serve then; see the module docstring)."""
        pool = self.pools.get(r.pool)
        if pool is None:  # no schedulable node: it holds nothing the cycle places on
            self.allocs[r.id] = []
            return True
        g, c, m = r.per_replica.as_tuple()
        done = []
        ok = True
        for entry in r.placement:
            n = pool.by_name.get(entry.get("node"))
            if n is None:
                continue
            gpus = entry.get("gpus")
            if not placed_gpus_valid(gpus, n):
                ok = False
                continue
            gpus = list(gpus)
            pool.take(n, gpus, g, c, m)
            done.append((n.idx, gpus))
        self.allocs[r.id] = done
        return ok

    def _release(self, r: RunningWorkload) -> None:
        pool = self.pools.get(r.pool)
        if pool is None:
            return
        shape = r.per_replica.as_tuple()
        for idx, gpus in self.allocs.get(r.id, ()):
            pool.take(pool.nodes[idx], gpus, *shape, sign=-1)


def schedulable_by_pool(nodes: list[NodeState]) -> dict[str, list[NodeState]]:
    out: dict[str, list[NodeState]] = {}
    for node in nodes:
        if node.schedulable:
            out.setdefault(node.pool, []).append(node)
    return out


def _moved(before: RunningWorkload | None, after: RunningWorkload | None) -> bool:
    """Whether what a workload holds differs between two records of it (None: not running)."""
    if before is after:
        return False
    if before is None or after is None:
        return True
    return (before.pool != after.pool or before.per_replica != after.per_replica
            or before.placement != after.placement)


def _same_nodes(a, b) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))
