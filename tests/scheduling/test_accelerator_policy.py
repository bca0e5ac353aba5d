"""Accelerator types and CPU architectures in the policy (policy.fold / policy.explain): a mixed
cluster of NVIDIA, Ascend and CPU-only nodes on amd64 and arm64. Unit cases, then properties
(hypothesis): work is never placed on a node of another type or architecture, gangs never mix
types, fragmentation stays per type, and NVIDIA-only inputs are left exactly as they were."""
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.policy import (
    Accel,
    Admit,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Pool,
    QuotaState,
    Resources,
    RunningWorkload,
    Snapshot,
    Wait,
    WaitKind,
    explain,
    fold,
    schedule,
)
from apps.scheduling.policy.accelerators import eligible, mixed_pools

T0 = datetime(2026, 1, 1)
BIG = Resources(10**9, 10**9, 10**9)


def node(name, gpus, accel: Accel, cpu=96, mem=1024, domain="") -> tuple[NodeState, Accel]:
    return (NodeState(name=name, pool="p", allocatable=Resources(gpus * 1000, cpu * 1000, mem * 1024),
                      gpu_model=accel.model, domains=(domain,) if domain else ()), accel)


def work(wid, gpu_milli, ask: Accel, replicas=1, cpu=4, project="a") -> tuple[PendingWorkload, Accel]:
    return (PendingWorkload(id=wid, project=project, pool="p", priority=3, submitted_at=T0 + timedelta(seconds=wid),
                            replicas=replicas, per_replica=Resources(gpu_milli, cpu * 1000, 8 * 1024),
                            gpu_model=ask.model), ask)


def run(nodes, works, running=(), **options):
    accels = {("p", n.name): a for n, a in nodes}
    asks = {w.id: a for w, a in works}
    snapshot = Snapshot(nodes=[n for n, _ in nodes], quotas=[QuotaState(project=p, pool="p", nominal=BIG)
                                                              for p in "abc"],
                        pending=[w for w, _ in works], running=list(running), now=T0)
    folded = fold(snapshot, accels, asks)
    return explain(schedule(folded, PolicyOptions(**options)), folded, accels, asks), accels, asks


NV = Accel("nvidia", "A100", "amd64")
ASC = Accel("ascend", "910B", "arm64")
CPU_ARM = Accel("none", "", "arm64")


def test_each_type_lands_on_its_own_nodes_and_a_missing_one_is_named():
    nodes = [node("nv-1", 8, NV), node("npu-1", 8, ASC), node("cpu-arm", 0, CPU_ARM)]
    decisions, accels, _ = run(nodes, [
        work(1, 8000, Accel("ascend", "910B")),
        work(2, 8000, Accel("ascend", "910B")),  # the only Ascend node is taken by 1
        work(3, 4000, Accel("nvidia")),
        work(4, 0, Accel("none", "", "arm64")),
        work(5, 1000, Accel("amd")),
    ], reservations=False)
    by_id = {d.workload_id: d for d in decisions}
    assert by_id[1].placement[0]["node"] == "npu-1"
    assert isinstance(by_id[2], Wait) and by_id[2].kind == WaitKind.CAPACITY
    assert by_id[2].reason.startswith("capacity: waiting for 8 Ascend 910B on one node; pool 'p' cannot fit 1 "
                                      "replica(s) of 8 NPU, 4 CPU, 8 GiB at once; the most free on one node is")
    assert by_id[3].placement[0]["node"] == "nv-1"
    assert by_id[4].placement[0]["node"] in ("cpu-arm", "npu-1")
    assert isinstance(by_id[5], Wait) and by_id[5].kind == WaitKind.CONSTRAINT
    assert by_id[5].reason == "constraint: pool 'p' has no schedulable node with AMD GPUs"


def test_architecture_alone_constrains_cpu_and_gpu_work():
    nodes = [node("x86", 4, Accel("nvidia", "L4", "amd64")), node("arm", 4, Accel("nvidia", "GH200", "arm64"))]
    decisions, _, _ = run(nodes, [work(1, 1000, Accel("nvidia", "", "arm64")), work(2, 0, Accel("none", "", "amd64")),
                                  work(3, 1000, Accel("nvidia", "L4", "arm64"))])
    by_id = {d.workload_id: d for d in decisions}
    assert by_id[1].placement[0]["node"] == "arm" and by_id[2].placement[0]["node"] == "x86"
    assert by_id[3].reason == "constraint: pool 'p' has no schedulable node with NVIDIA L4 on arm64"


def test_a_pool_of_one_architecture_refuses_another_with_a_reason():
    nodes = [node("a", 4, Accel("nvidia", "A100", "amd64")), node("b", 4, Accel("nvidia", "A100", "amd64"))]
    decisions, _, _ = run(nodes, [work(1, 1000, Accel("nvidia", "", "arm64"))])
    assert decisions[0].kind == WaitKind.CONSTRAINT
    assert decisions[0].reason == "constraint: pool 'p' has no schedulable node with NVIDIA GPUs on arm64"


def test_gangs_stay_in_one_type_and_in_the_fewest_domains_of_it():
    nodes = [node(f"nv{i}", 8, NV, domain=f"rack{i % 2}") for i in range(4)]
    nodes += [node(f"npu{i}", 8, ASC, domain=f"block{i % 2}") for i in range(4)]
    decisions, accels, _ = run(nodes, [work(1, 8000, Accel("ascend"), replicas=2)])
    placed = decisions[0].placement
    assert {accels[("p", p["node"])].type for p in placed} == {"ascend"}
    domains = {n.domains for n, _ in nodes if n.name in {p["node"] for p in placed}}
    assert len(domains) == 1


def test_nvidia_only_input_is_left_exactly_as_it_was():
    nodes = [node("a", 8, Accel("nvidia", "A100", "amd64")), node("b", 0, Accel("none", "", "amd64")),
             node("c", 4, Accel("nvidia", "H100", ""))]
    works = [work(1, 1000, Accel("nvidia", "A100|H100")), work(2, 0, Accel("none"))]
    accels = {("p", n.name): a for n, a in nodes}
    asks = {w.id: a for w, a in works}
    snapshot = Snapshot(nodes=[n for n, _ in nodes], quotas=[], pending=[w for w, _ in works], now=T0)
    assert fold(snapshot, accels, asks) == snapshot
    decisions = schedule(snapshot)
    assert explain(decisions, snapshot, accels, asks) == decisions


# -- properties ----------------------------------------------------------------------------------

TYPES = {"nvidia": ("A100", "H100"), "ascend": ("910B", "910C"), "none": ("",)}
node_st = st.tuples(st.sampled_from(sorted(TYPES)), st.integers(0, 1), st.sampled_from(["amd64", "arm64"]),
                    st.sampled_from([1, 2, 4, 8]), st.integers(8, 96), st.integers(0, 2))
work_st = st.tuples(st.sampled_from(["nvidia", "ascend", "none"]), st.sampled_from(["", "A100", "910B", "H100|A100"]),
                    st.sampled_from(["", "amd64", "arm64", "amd64|arm64"]),
                    st.sampled_from([250, 500, 1000, 2000, 4000, 8000]), st.integers(1, 3), st.integers(1, 16),
                    st.sampled_from("abc"))


def cluster(spec):
    out = []
    for i, (kind, m, arch, gpus, cpu, dom) in enumerate(spec):
        model = TYPES[kind][m % len(TYPES[kind])]
        out.append(node(f"n{i}", 0 if kind == "none" else gpus, Accel(kind, model, arch), cpu=cpu, domain=f"d{dom}"))
    return out


def workloads(spec, offset=0):
    out = []
    for i, (kind, model, arch, g, replicas, cpu, project) in enumerate(spec):
        gpu = 0 if kind == "none" else g
        out.append(work(offset + i, gpu, Accel(kind, model if gpu else "", arch), replicas=replicas, cpu=cpu,
                        project=project))
    return out


def check_placements(decisions, accels, asks, pending):
    for d in decisions:
        if not isinstance(d, Admit):
            continue
        w = pending[d.workload_id]
        ask = asks[d.workload_id]
        placed = [accels[("p", p["node"])] for p in d.placement]
        assert all(eligible(a, ask, w.per_replica.gpu_milli) for a in placed), (ask, placed)
        if w.per_replica.gpu_milli:
            assert {a.type for a in placed} == {ask.type}  # a gang never mixes types
        arches = ask.arches()
        assert not arches or all(a.arch in arches for a in placed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_st, min_size=1, max_size=8), st.lists(work_st, max_size=10), st.lists(work_st, max_size=10))
def test_never_placed_on_another_type_or_architecture_and_gangs_never_mix(node_spec, first, second):
    nodes = cluster(node_spec)
    batch1 = workloads(first)
    decisions, accels, asks = run(nodes, batch1)
    check_placements(decisions, accels, asks, {w.id: w for w, _ in batch1})
    # The admitted ones run; a second batch with preemption and reservations on.
    running = [RunningWorkload(id=d.workload_id, project=w.project, pool="p", priority=w.priority,
                               per_replica=w.per_replica, placement=tuple(d.placement), admitted_at=T0)
               for d in decisions if isinstance(d, Admit) for w, _ in batch1 if w.id == d.workload_id]
    batch2 = [(w, a) for w, a in workloads(second, offset=100)]
    decisions2, accels, asks2 = run(nodes, [(replace_priority(w), a) for w, a in batch2], running=running)
    check_placements(decisions2, accels, asks2, {w.id: w for w, _ in batch2})
    # Where the type matters (a mixed pool, or a type other than NVIDIA), the reason names it.
    mixed = mixed_pools(Snapshot(nodes=[n for n, _ in nodes], quotas=[], pending=[]), accels)
    for d in decisions2:
        if isinstance(d, Wait) and d.kind in (WaitKind.CAPACITY, WaitKind.CONSTRAINT):
            ask = asks2[d.workload_id]
            if ask.type == "ascend" or (ask.type == "nvidia" and mixed):
                assert {"nvidia": "NVIDIA", "ascend": "Ascend"}[ask.type] in d.reason  # the reason names the type


def replace_priority(w):
    from dataclasses import replace
    return replace(w, priority=w.id % 3)


@settings(max_examples=100, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=8), st.lists(work_st, min_size=1, max_size=10))
def test_fragmentation_stays_per_type(node_spec, spec):
    """A node's fragmentation counts only its own type's shapes as able to use its free devices:
    other types' shapes add exactly their weight times its free milli (they cannot use any of it),
    so they never change how the node's own type values it, nor which node of that type wins."""
    nodes = cluster(node_spec)
    works = workloads(spec)
    accels = {("p", n.name): a for n, a in nodes}
    asks = {w.id: a for w, a in works}
    folded = fold(Snapshot(nodes=[n for n, _ in nodes], quotas=[], pending=[w for w, _ in works], now=T0),
                  accels, asks)
    gpu_work = [w for w in folded.pending if w.per_replica.gpu_milli]
    mix = [(1.0, w.per_replica.as_tuple(), frozenset(m for m in w.gpu_model.split("|") if m) or None)
           for w in gpu_work]
    mixed_pool = Pool("p", folded.nodes, mix)
    for kind in ("nvidia", "ascend"):
        own = [entry for entry, w in zip(mix, gpu_work, strict=True) if asks[w.id].type == kind]
        other_weight = sum(entry[0] for entry, w in zip(mix, gpu_work, strict=True) if asks[w.id].type != kind)
        own_pool = Pool("p", folded.nodes, own)
        for n_mixed, n_own in zip(mixed_pool.nodes, own_pool.nodes, strict=True):
            if accels[("p", n_mixed.name)].type != kind or not n_mixed.ngpu:
                continue
            if any(models is None for _, _, models in mix):
                continue  # work allowed on every node with devices (a one-type pool): nothing to separate
            assert abs(mixed_pool.frag(n_mixed) - own_pool.frag(n_own) - other_weight * sum(n_mixed.gpus)) < 1e-6
