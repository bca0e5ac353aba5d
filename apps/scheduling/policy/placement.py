"""Placement and fragmentation: a pool's free capacity per GPU (milli-GPU), best-fit candidate
buckets, the fragmentation (FGD) and stranded-GPU scores for the task mix, contested GPU models,
the GPU-node reserve for CPU-only work, topology domains for gangs."""
from __future__ import annotations

import math
from collections.abc import Iterable

from .locality import holder_first
from .snapshot import GPU, NodeState, PendingWorkload, PolicyOptions

_BARE = PolicyOptions()


def kept_for_gpus(share: float, free_gpu_milli: int, gpu_milli: int, cpu_milli: int, memory_mb: int) -> tuple[int, int]:
    """CPU and memory a node with `gpu_milli` GPUs (`free_gpu_milli` free) keeps for them: `share`
    of the free GPUs' part of the node's `cpu_milli` and `memory_mb`."""
    if not share or not gpu_milli or not free_gpu_milli:
        return 0, 0
    part = share * free_gpu_milli / gpu_milli
    return int(cpu_milli * part), int(memory_mb * part)



def placed_gpus_valid(gpus, node) -> bool:
    """Whether a running placement entry names GPU indices that exist on `node` (an old row may
    name none; a node may have shrunk under its work)."""
    return gpus is not None and all(isinstance(i, int) and 0 <= i < node.ngpu for i in gpus)


class FreeNode:
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

    def copy(self) -> FreeNode:
        other = FreeNode.__new__(FreeNode)
        other.idx, other.name, other.model, other.ngpu, other.domains = self.idx, self.name, self.model, self.ngpu, self.domains
        other.gpus, other.cpu, other.mem, other.full, other.partial = list(self.gpus), self.cpu, self.mem, self.full, self.partial
        other.cap_cpu, other.cap_mem = self.cap_cpu, self.cap_mem
        return other


def _same(a: FreeNode, b: FreeNode) -> bool:
    """Interchangeable for placement: the same free GPUs, CPU, memory, model and domains."""
    return a.key() == b.key() and a.domains == b.domains


def _whole(g: int) -> int:
    return -(-g // GPU)


class Pool:
    """Mutable free-capacity view of one pool's schedulable nodes, indexed for best-fit lookups.

    Its tuning constants come from the cycle's `PolicyOptions` (`candidates`, `balance`, `stranded`,
    `contest`, documented there); `options` None: `PolicyOptions()`'s."""

    # Nodes whose caches hold the datasets of the workload being placed (set around one placement
    # by the cycle; locality.py): a tie-break only.
    holders: frozenset[str] = frozenset()

    def __init__(self, name: str, nodes: list[NodeState], mix: list[tuple], gpu_node_reserve: float = 0.0,
                 options: PolicyOptions | None = None):
        self.name = name
        self.reserve = gpu_node_reserve
        self._tune(options)
        self.nodes = [FreeNode(i, n) for i, n in enumerate(nodes)]
        self._setup(mix)

    def _tune(self, options: PolicyOptions | None) -> None:
        options = options or _BARE
        self.candidates, self.balance = options.candidates, options.balance
        self.stranded_weight, self.contest = options.stranded, options.contest

    def copy(self, mix: list[tuple], gpu_node_reserve: float, options: PolicyOptions | None = None) -> Pool:
        """A pool with this one's nodes and free capacity (copied: the copy's changes stay its own),
        indexed afresh for `mix` (as `canonical()` leaves it). How a cycle starts from a pool kept
        between cycles (cluster.py)."""
        other = Pool.__new__(Pool)
        other.name = self.name
        other.reserve = gpu_node_reserve
        other._tune(options)
        other.nodes = [n.copy() for n in self.nodes]
        other._setup(mix)
        return other

    def canonical(self) -> None:
        """File the nodes in the best-fit buckets (and `partial`) in node order, and forget the change
        log and what was derived from it. Within a cycle a node's place in its bucket follows the
        order of the changes (each re-filing puts it last), and candidates are gathered in that
        order; a cycle starts from this order so that its decisions depend on the free capacity
        alone, not on the order running work was applied in (a rebuilt pool and one kept between
        cycles then decide alike)."""
        self.buckets = [{} for _ in range(self.max_gpus + 1)]
        self.partial = {}
        for n in self.nodes:
            self.buckets[n.full][n.idx] = n
            if n.partial:
                self.partial[n.idx] = n
        self._log = []
        self._fit = {}
        self._summary = {}
        self.changes = 0

    def _setup(self, mix: list[tuple]) -> None:
        self.by_name = {n.name: n for n in self.nodes}
        self.max_gpus = max((n.ngpu for n in self.nodes), default=0)
        # buckets[k]: nodes with exactly k whole free GPUs; partial: nodes with a partly used GPU.
        self.buckets: list[dict[int, FreeNode]] = [{} for _ in range(self.max_gpus + 1)]
        self.partial: dict[int, FreeNode] = {}
        for n in self.nodes:
            self.buckets[n.full][n.idx] = n
            if n.partial:
                self.partial[n.idx] = n
        # (weight, (gpu, cpu, memory) per replica, allowed GPU models or None)
        self.mix = [(entry[0], entry[1], entry[2] if len(entry) > 2 else None) for entry in mix]
        self._frag_memo: dict[tuple, float] = {}
        self._waste_memo: dict[tuple, tuple[float, float]] = {}
        self.models = {n.model for n in self.nodes}
        self.contested = self._contested() if self.contest else frozenset()
        # The mix's average CPU and memory per GPU milli, over its GPU shapes.
        gpu_weight = sum(weight * g for weight, (g, _, _), _ in self.mix if g)
        self.cpu_per_gpu = sum(weight * c for weight, (g, c, _), _ in self.mix if g) / gpu_weight if gpu_weight else 0.0
        self.mem_per_gpu = sum(weight * m for weight, (g, _, m), _ in self.mix if g) / gpu_weight if gpu_weight else 0.0
        self.changes = 0  # bumped on every change of free capacity (for memoised summaries)
        self.free_gpu = sum(sum(n.gpus) for n in self.nodes)
        # free_summary's, per allowed models: (length of _log, node count, the most free, that node's index)
        self._summary: dict[frozenset[str] | None, tuple[int, int, tuple[int, int, int], int]] = {}
        # Topology domains: per level (finest first), each domain's nodes. With `_log` (the nodes whose
        # free capacity changed, in order) they keep per-domain capacities for gangs up to date by
        # looking again only at the nodes that changed (see _domain_fit).
        self.levels = max((len(n.domains) for n in self.nodes), default=0)
        self.domain_nodes: list[dict[str, list[FreeNode]]] = [{} for _ in range(self.levels)]
        for n in self.nodes:
            for level, dom in enumerate(n.domains):
                self.domain_nodes[level].setdefault(dom, []).append(n)
        self._log: list[int] = []
        self._fit: dict[tuple, list] = {}
        # During fits(): the best-fit buckets (key -1: `partial`) as they were before the trial first
        # re-filed a node in them, to put back afterwards.
        self._saved: dict[int, dict[int, FreeNode]] | None = None

    def _contested(self) -> frozenset[str]:
        """GPU models that constrained work in the task mix is short of (PolicyOptions.contest)."""
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
        return frozenset(x for x, d in demand.items() if d / total > self.contest * capacity[x] / total_capacity)

    # bookkeeping
    def _keep(self, k: int) -> None:
        """Inside fits(): remember bucket k (-1: `partial`) as it was before the trial's first change to it."""
        saved = self._saved
        if saved is not None and k not in saved:
            saved[k] = dict(self.partial if k < 0 else self.buckets[k])

    def _reindex(self, n: FreeNode) -> None:
        """Called after every change of n's free capacity: re-files it in the best-fit buckets."""
        self._log.append(n.idx)
        gpus = n.gpus
        full = gpus.count(GPU)
        partial = full + gpus.count(0) != len(gpus)  # a GPU neither whole nor empty
        if self._saved is not None:
            if full != n.full:
                self._keep(n.full)
                self._keep(full)
            if partial != n.partial:
                self._keep(-1)
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

    def take(self, n: FreeNode, gpus: list[int], g: int, c: int, m: int, sign: int = 1) -> None:
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
    def frag(self, n: FreeNode, key: tuple | None = None) -> float:
        key = n.key() if key is None else key
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

    def stranded(self, n: FreeNode) -> float:
        """Free GPU milli of n beyond what its free CPU and memory could serve at the mix's average
        CPU and memory per GPU."""
        if not self.cpu_per_gpu and not self.mem_per_gpu:
            return 0.0
        by_cpu = n.cpu / self.cpu_per_gpu if self.cpu_per_gpu else math.inf
        by_mem = n.mem / self.mem_per_gpu if self.mem_per_gpu else math.inf
        return max(0.0, sum(n.gpus) - min(by_cpu, by_mem))

    def waste(self, n: FreeNode) -> float:
        """What placement minimises the growth of: fragmentation plus weighted stranded GPU milli
        (a function of n's free capacity and model, memoised on them)."""
        key = n.key()
        memo = self._waste_memo
        value = memo.get(key)
        weight = self.stranded_weight
        if value is None or value[0] != weight:
            frag = self.frag(n, key)
            value = (weight, frag + weight * self.stranded(n) if weight else frag)
            if len(memo) > 200_000:
                memo.clear()
            memo[key] = value
        return value[1]

    def reserved(self, n: FreeNode) -> tuple[int, int]:
        """CPU and memory of n that work asking for no GPU may not take (Snapshot.gpu_node_reserve)."""
        return kept_for_gpus(self.reserve, sum(n.gpus), n.ngpu * GPU, n.cap_cpu, n.cap_mem)

    def _gpus_for(self, n: FreeNode, g: int) -> list[int] | None:
        """GPU indices a replica of `g` milli would take on n (best fit for a fraction), or None."""
        if g == 0:
            return []
        if g >= GPU:
            k = _whole(g)
            gpus = n.gpus
            if k == 1:
                return [gpus.index(GPU)] if GPU in gpus else None
            free = [i for i, x in enumerate(gpus) if x == GPU]
            return free[:k] if len(free) >= k else None
        best = None
        for i, x in enumerate(n.gpus):
            if x >= g and (best is None or x < n.gpus[best]):
                best = i
        return None if best is None else [best]

    def _candidates(self, shape: tuple[int, int, int], models: frozenset[str] | None,
                    allowed: set[int] | None, avoid: bool = True) -> list[FreeNode]:
        g, c, m = shape
        out: list[FreeNode] = []
        limit = self.candidates

        # Whole-GPU work that may run on any model first looks beyond the contested models.
        skip = self.contested if avoid and g >= GPU and models is None and self.contested else None

        fractional = 0 < g < GPU
        reserve = g == 0 and self.reserve
        by_model = skip is not None or models is not None

        def consider(nodes: Iterable[FreeNode]) -> bool:
            for n in nodes:
                if n.cpu < c or n.mem < m:
                    continue
                if allowed is not None and n.idx not in allowed:
                    continue
                if by_model and ((skip is not None and n.model in skip)
                                 or (models is not None and n.model not in models)):
                    continue
                if reserve:
                    keep_cpu, keep_mem = self.reserved(n)
                    if n.cpu - c < keep_cpu or n.mem - m < keep_mem:
                        continue
                if fractional and n.full == 0 and max(n.gpus, default=0) < g:
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

    def can_take(self, n: FreeNode, shape: tuple[int, int, int], models: frozenset[str] | None) -> bool:
        """Whether one replica of `shape`, asking for a GPU, fits on n now: n is among the nodes that
        `_candidates` gathers from for it (the preference for uncontested models aside). place_one
        places such a replica if and only if some node of the pool can take it."""
        g, c, m = shape
        if n.cpu < c or n.mem < m or (models is not None and n.model not in models):
            return False
        if g >= GPU:
            return n.full >= _whole(g)
        return max(n.gpus, default=0) >= g

    def place_one(self, shape: tuple[int, int, int], models: frozenset[str] | None,
                  allowed: set[int] | None = None) -> tuple[FreeNode, list[int]] | None:
        g, c, m = shape
        best = None
        candidates = [(n, gpus) for n in self._candidates(shape, models, allowed)
                      if (gpus := self._gpus_for(n, g)) is not None]
        if g and len(candidates) > 1:
            candidates = self._balanced(candidates, shape) or candidates
        per_gpu = g if g < GPU else GPU
        if self.holders:  # data-aware: a holder of the datasets among equal candidates (locality.py)
            candidates = holder_first(candidates, self.holders, _same)
        for n, gpus in candidates:
            if not self.mix or len(self.nodes) == 1:
                return n, gpus
            before = self.waste(n)
            # The waste after placing it, on the node alone (as take() and back, without re-filing it).
            for i in gpus:
                n.gpus[i] -= per_gpu
            n.cpu -= c
            n.mem -= m
            delta = self.waste(n) - before
            moved = n.gpus.count(GPU) != n.full
            left_partial = n.partial and n.gpus.count(GPU) + n.gpus.count(0) == len(n.gpus)
            for i in gpus:
                n.gpus[i] += per_gpu
            n.cpu += c
            n.mem += m
            self.changes += 2  # as a take() and its undo count (memoised summaries and waits read it)
            # A take() and its undo leave the node last in its bucket (and in `partial`) when they
            # moved it out and back: candidates are gathered in that order, so do the same.
            if moved:
                self._keep(n.full)
                bucket = self.buckets[n.full]
                del bucket[n.idx]
                bucket[n.idx] = n
            if left_partial:
                self._keep(-1)
                del self.partial[n.idx]
                self.partial[n.idx] = n
            score = (delta, n.cpu - c, n.idx)
            if best is None or score < best[0]:
                best = (score, n, gpus)
        if best is None:
            return None
        return holder_first([(best[1], best[2]), *candidates], self.holders, _same)[0] if self.holders else best[1:]

    def _balanced(self, candidates: list[tuple[FreeNode, list[int]]],
                  shape: tuple[int, int, int]) -> list[tuple[FreeNode, list[int]]]:
        """The (node, GPUs) candidates where a GPU replica of `shape` leaves the node's other free
        GPUs `balance` of their share of its CPU and memory."""
        g, c, m = shape
        out = []
        for n, gpus in candidates:
            keep_cpu, keep_mem = kept_for_gpus(self.balance, sum(n.gpus) - min(g, GPU) * len(gpus), n.ngpu * GPU,
                                               n.cap_cpu, n.cap_mem)
            if n.cpu - c >= keep_cpu and n.mem - m >= keep_mem:
                out.append((n, gpus))
        return out

    def capacity_for(self, n: FreeNode, shape: tuple[int, int, int]) -> int:
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
                   models: frozenset[str] | None) -> list[tuple[FreeNode, list[int]]] | None:
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

    def place_only(self, shape: tuple[int, int, int], replicas: int, models: frozenset[str] | None,
                   allowed: set[int]) -> list[tuple[FreeNode, list[int]]] | None:
        """Place every replica on the nodes `allowed` (applied to the state), or nothing, the pool
        then left exactly as it was found (as by fits(): best-fit buckets and change counter too)."""
        if self._saved is not None:
            return self._place_seq(shape, replicas, models, allowed)
        changes = self.changes
        self._saved = saved = {}
        done = None
        try:
            done = self._place_seq(shape, replicas, models, allowed)
        finally:
            self._saved = None
            if done is None:
                for k, bucket in saved.items():
                    if k < 0:
                        self.partial = bucket
                    else:
                        self.buckets[k] = bucket
                self.changes = changes
        return done

    def empty_capacity(self, n: FreeNode, shape: tuple[int, int, int], models: frozenset[str] | None) -> int:
        """How many replicas of `shape` n could hold were it empty (its allocatable), 0 for a model not allowed."""
        g, c, m = shape
        if models is not None and n.model not in models:
            return 0
        count = min(n.cap_cpu // c if c else 10**6, n.cap_mem // m if m else 10**6)
        if g >= GPU:
            return min(count, n.ngpu // _whole(g))
        if g:
            return min(count, n.ngpu * (GPU // g))
        return count

    def fits(self, shape: tuple[int, int, int], replicas: int, models: frozenset[str] | None) -> bool:
        """Whether place_gang would place the gang now. A trial: it leaves the pool exactly as it found
        it, the order of the best-fit buckets and the change counter included (a placement and its
        undo would otherwise leave the nodes it scored last in their buckets, where later candidates
        are gathered from, so that whether a trial ran would change later placements)."""
        if replicas > 1 and self.levels and shape[1] > 0 and shape[2] > 0:
            return self._gang_fits(shape, replicas, models)
        if self._saved is not None:  # inside another trial: that one puts everything back
            done = self.place_gang(shape, replicas, models)
            if done is not None:
                for n, gpus in done:
                    self.take(n, gpus, *shape, sign=-1)
            return done is not None
        changes = self.changes
        self._saved = saved = {}
        try:
            done = self.place_gang(shape, replicas, models)
            if done is not None:
                for n, gpus in done:
                    self.take(n, gpus, *shape, sign=-1)
        finally:
            self._saved = None
            for k, bucket in saved.items():
                if k < 0:
                    self.partial = bucket
                else:
                    self.buckets[k] = bucket
            self.changes = changes
        return done is not None

    def _gang_fits(self, shape: tuple[int, int, int], replicas: int, models: frozenset[str] | None) -> bool:
        """fits() for a gang on a pool with topology domains, from the nodes' capacities alone. A replica
        placed on a node lowers its capacity for the shape (capacity_for) by exactly one (CPU and
        memory asked, so neither term is unbounded), and place_one places a replica while some node
        it may use has capacity left: a node set takes the gang if and only if its capacities add up
        to the replicas. place_gang tries the node sets of _domain_groups, or every node without one."""
        fit, sums = self._domain_fit(shape, models)
        groups = self._domain_groups(shape, replicas, models)
        if groups is None:
            return sums[-1] >= replicas if sums else sum(f for f in fit if f > 0) >= replicas
        return any(sum(fit[i] for i in group if fit[i] > 0) >= replicas for group in groups)

    def _place_seq(self, shape, replicas, models, allowed) -> list[tuple[FreeNode, list[int]]] | None:
        g, c, m = shape
        done: list[tuple[FreeNode, list[int]]] = []
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
        levels = self.levels
        fit, sums = self._domain_fit(shape, models)
        tries: list[set[int]] = []
        for level in range(levels):
            fitting = sorted((cap, dom) for dom, cap in sums[level].items() if cap >= replicas and cap > 0)
            if fitting:
                tries.extend(self._members(level, dom, fit) for _, dom in fitting[:2])
                return tries
            if level < levels - 1:
                continue
            capacity = {dom: cap for dom, cap in sums[level].items() if cap > 0}
            if capacity:
                # No single domain: take the biggest domains until the gang fits.
                chosen: set[int] = set()
                total = 0
                for cap, dom in sorted(((cap, dom) for dom, cap in capacity.items()), reverse=True):
                    chosen |= self._members(level, dom, fit)
                    total += cap
                    if total >= replicas:
                        break
                tries.append(chosen)
        return tries or None

    def _members(self, level: int, dom: str, fit: list[int]) -> set[int]:
        return {n.idx for n in self.domain_nodes[level][dom] if fit[n.idx]}

    def _domain_fit(self, shape, models) -> tuple[list[int], list]:
        """How many replicas of `shape` fit on each node now, their sums per domain of each level, and
        (last in that list) the sum over the nodes where it is positive, what a gang may use at most.
        Kept per (shape, models, reserve) and brought up to date from the nodes changed since the
        last call (`_log`), so a gang's search costs the changes, not the pool's size."""
        key = (shape, models, self.reserve)
        entry = self._fit.get(key)
        log = self._log
        if entry is not None and len(log) - entry[0] <= len(self.nodes):
            synced, fit, sums = entry
            changed = {i: self.nodes[i] for i in log[synced:]}.values()
        else:
            fit = [0] * len(self.nodes)
            sums = [*(dict.fromkeys(doms, 0) for doms in self.domain_nodes), 0]
            changed = self.nodes
        total = sums[-1]
        for n in changed:
            now = 0 if models is not None and n.model not in models else self.capacity_for(n, shape)
            was = fit[n.idx]
            delta = now - was
            if delta:
                fit[n.idx] = now
                total += (now if now > 0 else 0) - (was if was > 0 else 0)
                for level, dom in enumerate(n.domains):
                    sums[level][dom] += delta
        sums[-1] = total
        if len(self._fit) > 512:
            self._fit.clear()
        self._fit[key] = (len(log), fit, sums)
        return fit, sums

    def free_summary(self, models: frozenset[str] | None) -> tuple[int, tuple[int, int, int]]:
        """How many nodes have an allowed model, and the most (GPU, CPU, memory) free on one of them.
        Kept per `models` and brought up to date from the nodes changed since (`_log`); the pool
        is scanned again only when the node that had the most lost some."""
        cached = self._summary.get(models)
        log = self._log
        if cached is not None and cached[0] == len(log):
            return cached[1], cached[2]
        if cached is not None and len(log) - cached[0] <= len(self.nodes):
            _, count, most, where = cached
            for i in dict.fromkeys(log[cached[0]:]):
                n = self.nodes[i]
                if models is not None and n.model not in models:
                    continue
                here = (sum(n.gpus), n.cpu, n.mem)
                if i == where and here < most:
                    cached = None  # the largest shrank: look at every node again
                    break
                if here > most:
                    most, where = here, i
        if cached is None or len(log) - cached[0] > len(self.nodes):
            most, where, count = (0, 0, 0), -1, 0
            for n in self.nodes:
                if models is not None and n.model not in models:
                    continue
                count += 1
                here = (sum(n.gpus), n.cpu, n.mem)
                if here > most:
                    most, where = here, n.idx
        self._summary[models] = (len(log), count, most, where)
        return count, most


_MODELS: dict[str, frozenset[str] | None] = {}


def allowed_models(w: PendingWorkload) -> frozenset[str] | None:
    """The GPU models w may run on (None: any); parsed once per distinct `gpu_model` string."""
    spec = w.gpu_model
    if not spec:
        return None
    models = _MODELS.get(spec)
    if models is None:
        if len(_MODELS) > 4096:
            _MODELS.clear()
        models = _MODELS[spec] = frozenset(m for m in spec.split("|") if m) or None
    return models


def placement_entries(done: list[tuple[FreeNode, list[int]]]) -> list[dict]:
    return [{"replica": i, "node": n.name, "gpus": list(gpus)} for i, (n, gpus) in enumerate(done)]
