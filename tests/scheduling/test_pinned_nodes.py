"""Work pinned to some nodes (Workload.node_affinity: a notebook's home volume bound in one zone)
is placed only there by the scheduling service (real PostgreSQL), waits with a reason that names
what pins it when none of them can take it, and leaves unpinned work's choice as it was."""
import pytest

from apps.clusters.affinity import describe_terms, node_matches, terms_of
from apps.scheduling.services import scheduling_cycle
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

ZONE = "topology.kubernetes.io/zone"
ZONE_B = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]


def test_node_affinity_terms_match_as_kubernetes_reads_them():
    pv_affinity = {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]},
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n9"]}]}]}}
    terms = terms_of(pv_affinity)
    assert node_matches("n1", {ZONE: "zone-a"}, terms)
    assert not node_matches("n2", {ZONE: "zone-b"}, terms)
    assert node_matches("n9", {}, terms)  # the hostname falls back to the node's name
    assert node_matches("n1", {}, [])  # nothing required: any node
    assert not node_matches("n1", {"gen": "3"}, [{"matchExpressions": [
        {"key": "gen", "operator": "Gt", "values": ["3"]}]}])
    assert node_matches("n1", {}, [{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}])
    assert describe_terms(terms) == f"{ZONE} in (zone-a); or kubernetes.io/hostname in (n9)"


@pytest.fixture
def zones(project, pool):
    size = {"cpu_milli_allocatable": 16000, "memory_mb_allocatable": 65536}
    for name, zone in (("a-0", "zone-a"), ("a-1", "zone-a"), ("b-0", "zone-b")):
        NodeFactory(pool=pool, name=name, labels={ZONE: zone}, **size)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=0, nominal_cpu_milli=10**6, nominal_memory_mb=10**7)
    return project, pool


def test_a_pinned_workload_lands_only_on_a_node_its_volume_allows(zones):
    project, pool = zones
    # Emptier nodes first would pick zone-a (two nodes, best fit by name): pinned to zone-b.
    pinned = [WorkloadFactory(project=project, pool=pool, kind="notebook", cpu_milli=1000, memory_mb=1024,
                              node_affinity=ZONE_B) for _ in range(3)]
    free = WorkloadFactory(project=project, pool=pool, cpu_milli=1000, memory_mb=1024)
    scheduling_cycle()
    for w in (*pinned, free):
        w.refresh_from_db()
    assert [w.placement[0]["node"] for w in pinned] == ["b-0"] * 3, [w.pending_reason for w in pinned]
    assert free.status == "admitted"


def test_a_pinned_workload_none_of_whose_nodes_fits_waits_saying_why(zones):
    project, pool = zones
    big = WorkloadFactory(project=project, pool=pool, kind="notebook", cpu_milli=12000, memory_mb=1024,
                          node_affinity=ZONE_B)
    second = WorkloadFactory(project=project, pool=pool, kind="notebook", cpu_milli=12000, memory_mb=1024,
                             node_affinity=ZONE_B)
    nowhere = WorkloadFactory(project=project, pool=pool, kind="notebook", cpu_milli=1000, memory_mb=1024,
                              node_affinity=[{"matchExpressions": [{"key": ZONE, "operator": "In",
                                                                    "values": ["zone-c"]}]}])
    scheduling_cycle()
    for w in (big, second, nowhere):
        w.refresh_from_db()
    assert big.status == "admitted" and big.placement[0]["node"] == "b-0"
    # zone-a has room for it, but its volume is in zone-b: it waits for b-0
    assert second.status == "queued" and second.waiting_on == "capacity", second.pending_reason
    assert second.pending_reason.endswith(f"(it may run on 1 node(s) only: its volume's node affinity ({ZONE} in "
                                          "(zone-b)))"), second.pending_reason
    assert "@" not in second.pending_reason
    assert nowhere.status == "queued" and nowhere.waiting_on == "constraint"
    assert nowhere.pending_reason == (f"constraint: its volume's node affinity ({ZONE} in (zone-c)); no schedulable "
                                      f"node of pool '{pool.name}' matches it")


def test_pinning_keys_nodes_by_the_pins_that_allow_them_not_one_key_per_node():
    from datetime import UTC, datetime

    from apps.scheduling.policy import (
        NodeState,
        PendingWorkload,
        Resources,
        Snapshot,
        Wait,
        WaitKind,
        explain_pins,
        pin,
    )

    nodes = [NodeState(name=f"n{i}", pool="p", allocatable=Resources(8000, 64000, 10**6), gpu_model="H100")
             for i in range(100)]
    zone_b = frozenset(f"n{i}" for i in range(50, 100))
    now = datetime.now(UTC)
    pinned = PendingWorkload(id=1, project="x", pool="p", priority=2, submitted_at=now, replicas=1,
                             per_replica=Resources(0, 1000, 1024), nodes=zone_b, nodes_why="its volume")
    modelled = PendingWorkload(id=2, project="x", pool="p", priority=2, submitted_at=now, replicas=1,
                               per_replica=Resources(1000, 1000, 1024), gpu_model="H100")
    free = PendingWorkload(id=3, project="x", pool="p", priority=2, submitted_at=now, replicas=1,
                           per_replica=Resources(1000, 1000, 1024))
    snapshot = pin(Snapshot(nodes=nodes, quotas=[], pending=[pinned, modelled, free]))
    assert {n.gpu_model for n in snapshot.nodes} == {"H100@", "H100@0"}  # two keys for two zones
    keys = {w.id: w.gpu_model for w in snapshot.pending}
    assert keys == {1: "H100@0", 2: "H100@|H100@0", 3: ""}
    # an unpinned workload's reason names its model, not the keys
    wait = Wait(2, "constraint: pool 'p' has no schedulable node with GPU model H100@ or H100@0",
                kind=WaitKind.CONSTRAINT)
    [reworded] = explain_pins([wait], snapshot)
    assert reworded.reason == "constraint: pool 'p' has no schedulable node with GPU model H100 or H100"
    # untouched when nothing is pinned
    plain = Snapshot(nodes=nodes, quotas=[], pending=[modelled, free])
    assert pin(plain) is plain
