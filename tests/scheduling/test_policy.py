"""The pure policy, over plain data."""
from datetime import datetime, timedelta

from apps.scheduling.policy import (
    Admit,
    NodeState,
    PendingWorkload,
    QuotaState,
    Resources,
    Snapshot,
    Wait,
    schedule,
)

T0 = datetime(2026, 1, 1)


def job(id, *, project="a", priority=3, replicas=1, gpu=0, cpu=1000, mem=1024, at=0, model=""):
    return PendingWorkload(id=id, project=project, pool="p", priority=priority, submitted_at=T0 + timedelta(seconds=at),
                           replicas=replicas, per_replica=Resources(gpu, cpu, mem), gpu_model=model)


def node(name, gpus=8, cpu=64000, mem=512 * 1024, model="A100"):
    return NodeState(name=name, pool="p", free=Resources(gpus * 1000, cpu, mem), gpu_model=model)


def quota(project="a", gpus=16, cpu=1_000_000, mem=10**9, used=Resources()):
    return QuotaState(project=project, pool="p", nominal=Resources(gpus * 1000, cpu, mem), used=used)


def by_id(decisions):
    return {d.workload_id: d for d in decisions}


def test_priority_then_submit_order():
    pending = [job(1, priority=3, gpu=8000, at=0), job(2, priority=1, gpu=8000, at=5), job(3, priority=1, gpu=8000, at=9)]
    decisions = by_id(schedule(Snapshot([node("n1")], [quota()], pending)))
    assert isinstance(decisions[2], Admit)
    assert isinstance(decisions[1], Wait) and isinstance(decisions[3], Wait)
    assert "capacity" in decisions[1].reason


def test_quota_blocks_with_a_reason_naming_the_quota():
    decisions = by_id(schedule(Snapshot([node("n1"), node("n2")], [quota(gpus=4)], [job(1, gpu=8000)])))
    assert isinstance(decisions[1], Wait)
    assert decisions[1].reason == "quota: project 'a' has 4 of 4 GPU free on pool 'p'; this workload needs 8"


def test_quota_counts_running_usage_and_admissions_in_the_same_cycle():
    pending = [job(1, gpu=2000), job(2, gpu=2000, at=1)]
    decisions = by_id(schedule(Snapshot([node("n1")], [quota(gpus=5, used=Resources(2000, 0, 0))], pending)))
    assert isinstance(decisions[1], Admit) and isinstance(decisions[2], Wait)


def test_no_quota_means_wait():
    decisions = schedule(Snapshot([node("n1")], [], [job(1)]))
    assert decisions == [Wait(1, "quota: project 'a' has no quota on pool 'p'")]


def test_gang_is_all_or_nothing():
    nodes = [node("n1", gpus=4), node("n2", gpus=2)]
    decisions = by_id(schedule(Snapshot(nodes, [quota(gpus=100)], [job(1, replicas=4, gpu=2000)])))
    assert isinstance(decisions[1], Wait)  # needs 4x2 GPUs, only 3 slots of 2 exist
    assert nodes[0].free.gpu_milli == 4000 and nodes[1].free.gpu_milli == 2000  # nothing half-taken
    decisions = by_id(schedule(Snapshot(nodes, [quota(gpus=100)], [job(2, replicas=3, gpu=2000)])))
    assert isinstance(decisions[2], Admit)
    assert [p["node"] for p in decisions[2].placement] == ["n1", "n1", "n2"]
    assert [p["replica"] for p in decisions[2].placement] == [0, 1, 2]


def test_fractional_gpus_share_a_node():
    decisions = schedule(Snapshot([node("n1", gpus=1)], [quota()], [job(i, gpu=250, at=i) for i in range(5)]))
    assert [type(d).__name__ for d in decisions] == ["Admit"] * 4 + ["Wait"]


def test_gpu_model_constraint():
    nodes = [node("h", model="H100"), node("a", model="A100")]
    decisions = by_id(schedule(Snapshot(nodes, [quota()], [job(1, gpu=1000, model="A100"), job(2, gpu=1000, model="B200")])))
    assert decisions[1].placement == [{"replica": 0, "node": "a"}]
    assert "no schedulable node with GPU model 'B200'" in decisions[2].reason


def test_unschedulable_nodes_are_skipped():
    cordoned = node("n1")
    cordoned.schedulable = False
    decisions = schedule(Snapshot([cordoned], [quota()], [job(1)]))
    assert isinstance(decisions[0], Wait) and "no schedulable node" in decisions[0].reason


def test_lower_priority_small_job_may_use_what_a_big_one_cannot():
    pending = [job(1, priority=0, gpu=16000), job(2, priority=5, gpu=1000)]
    decisions = by_id(schedule(Snapshot([node("n1")], [quota(gpus=32)], pending)))
    assert isinstance(decisions[1], Wait) and isinstance(decisions[2], Admit)
