"""Data-aware placement (policy/locality.py), property-tested: preferring nodes that cache a
workload's datasets is a tie-break between interchangeable nodes, so it never changes which
workloads are admitted, which wait (and why) or which are preempted, and it picks a holder
whenever a holder was as good as the node chosen without it."""
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.policy import (
    Admit,
    NodeState,
    PendingWorkload,
    Preempt,
    QuotaState,
    Resources,
    Snapshot,
    Wait,
    holder_first,
    schedule,
)
from tests.scheduling.test_policy_properties import T0, build, nodes_st, quota_st, work_st


def outcome(decisions):
    return ({d.workload_id for d in decisions if isinstance(d, Admit)},
            {(d.workload_id, d.kind) for d in decisions if isinstance(d, Wait)},
            {(d.workload_id, d.preemptor_id) for d in decisions if isinstance(d, Preempt)},
            {d.workload_id: len(d.placement) for d in decisions if isinstance(d, Admit)})


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, st.tuples(quota_st, quota_st, quota_st), work_st, work_st, st.data())
def test_locality_never_changes_admission_waits_or_preemption(nodes, quotas, first, second, data):
    node_states, quota_states, running, pending = build(nodes, quotas, first, second)
    names = [n.name for n in node_states]
    with_data = [dataclasses.replace(w, datasets_on=frozenset(data.draw(st.sets(st.sampled_from(names)))))
                 for w in pending]
    plain = schedule(Snapshot(node_states, quota_states, pending, running=running, now=T0))
    local = schedule(Snapshot(node_states, quota_states, with_data, running=running, now=T0))
    assert outcome(local) == outcome(plain)


@settings(max_examples=150, deadline=None, database=None)
@given(st.integers(2, 8), st.sampled_from([0, 1000, 2000, 500]), st.integers(1, 4), st.data())
def test_among_identical_free_nodes_a_holder_is_chosen(count, gpu_milli, cpu, data):
    nodes = [NodeState(name=f"n{i}", pool="p", allocatable=Resources(8000, 64000, 256 * 1024)) for i in range(count)]
    holder = data.draw(st.sampled_from([n.name for n in nodes]))
    work = PendingWorkload(id=1, project="a", pool="p", priority=3, submitted_at=T0, replicas=1,
                           per_replica=Resources(gpu_milli, cpu * 1000, 1024), datasets_on=frozenset({holder}))
    [decision] = schedule(Snapshot(nodes, _open_quota(), [work], now=T0))
    assert isinstance(decision, Admit)
    assert decision.placement[0]["node"] == holder


def _open_quota():
    return [QuotaState(project="a", pool="p", nominal=Resources(10**6, 10**7, 10**9))]


class _N:
    def __init__(self, name, key):
        self.name, self.k = name, key


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=8))
def test_holder_first_only_swaps_an_equal_holder_to_the_front(items):
    candidates = [(_N(f"n{i}", key), None) for i, (key, _) in enumerate(items)]
    holders = frozenset(f"n{i}" for i, (_, held) in enumerate(items) if held)
    out = holder_first(candidates, holders, lambda a, b: a.k == b.k)
    assert sorted(id(c) for c in out) == sorted(id(c) for c in candidates)  # a permutation
    first = candidates[0][0]
    chosen = out[0][0]
    assert chosen.k == first.k  # never a worse (different) node
    equal_holders = [n for n, _ in candidates if n.name in holders and n.k == first.k]
    if equal_holders:
        assert chosen.name in holders  # a holder whenever one was as good
    else:
        assert chosen is first
