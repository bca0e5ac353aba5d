"""The scheduling service on real PostgreSQL: snapshot, compare-and-set, leader lock."""
import threading

import pytest
from django.db import connection, transaction

from apps.clusters.selectors import QueuePositions
from apps.core.models import OutboxMessage
from apps.quotas.models import UsageRecord
from apps.scheduling.policy import ClusterState
from apps.scheduling.services import SCHEDULER_LOCK_KEY, scheduling_cycle
from apps.workloads.models import Workload
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory


@pytest.fixture
def setup(project, pool):
    NodeFactory(pool=pool, name="n1", gpu_count=4, cpu_milli_allocatable=32000, memory_mb_allocatable=128000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=3000, nominal_cpu_milli=32000,
                 nominal_memory_mb=128000)
    return project, pool


def test_cycle_admits_what_fits_and_explains_the_rest(setup):
    project, pool = setup
    first = WorkloadFactory(project=project, pool=pool, gpu_milli=2000, priority=1)
    second = WorkloadFactory(project=project, pool=pool, gpu_milli=2000, priority=2)
    result = scheduling_cycle()
    assert (result.admitted, result.waiting) == (1, 1)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "admitted" and first.placement == [{"replica": 0, "node": "n1", "gpus": [0, 1]}]
    assert first.admitted_at is not None and first.pending_reason == ""
    assert second.status == "queued" and "has 1 of its nominal 3 GPU free on pool 'local' and can borrow 0 more" in second.pending_reason
    assert OutboxMessage.objects.filter(topic="workload.dispatch", payload={"workload_id": first.pk}).count() == 1
    assert UsageRecord.objects.filter(workload=first, ended_at__isnull=True, gpu_milli=2000).count() == 1


def test_running_workloads_hold_node_capacity(setup):
    project, pool = setup
    neighbour = QuotaFactory(pool=pool, nominal_cpu_milli=32000).project
    WorkloadFactory(project=neighbour, pool=pool, status="running", gpu_milli=0, cpu_milli=30000,
                    placement=[{"replica": 0, "node": "n1"}])
    waiting = WorkloadFactory(project=project, pool=pool, cpu_milli=4000)
    scheduling_cycle()
    waiting.refresh_from_db()
    assert waiting.status == "queued" and waiting.pending_reason.startswith("reserved: pool")
    assert QueuePositions().of(pool_id=waiting.pool_id, workload_id=waiting.pk) == 1
    assert waiting.estimated_start is None  # the neighbour's end is unknown


def test_a_second_scheduler_does_nothing_while_the_leader_holds_the_lock(setup, django_db_blocker):
    project, pool = setup
    WorkloadFactory(project=project, pool=pool)
    from django.db import connections

    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SCHEDULER_LOCK_KEY])
            result = scheduling_cycle()
            cursor.execute("COMMIT")
    finally:
        other.close()
    assert result.ran is False
    assert Workload.objects.get().status == "queued"
    assert scheduling_cycle().admitted == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_cycles_never_exceed_quota(project, pool):
    NodeFactory(pool=pool, name="big", gpu_count=64, cpu_milli_allocatable=10**6, memory_mb_allocatable=10**7)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=5000)
    for i in range(20):
        WorkloadFactory(project=project, pool=pool, gpu_milli=1000, name=f"j{i}")
    barrier = threading.Barrier(4)

    def run():
        barrier.wait()
        try:
            for _ in range(5):
                scheduling_cycle()
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admitted = Workload.objects.filter(status="admitted")
    assert admitted.count() == 5
    assert OutboxMessage.objects.filter(topic="workload.dispatch").count() == 5


def test_stopped_while_scheduling_is_not_admitted(setup):
    """The compare-and-set loses cleanly when the user stopped the job in between."""
    project, pool = setup
    workload = WorkloadFactory(project=project, pool=pool)
    from apps.scheduling import services

    original = services.schedule

    def stop_then_decide(snapshot, *options, **kept):
        decisions = original(snapshot, *options, **kept)
        with transaction.atomic():
            Workload.objects.filter(pk=workload.pk).update(status="stopped")
        return decisions

    services.schedule = stop_then_decide
    try:
        result = scheduling_cycle()
    finally:
        services.schedule = original
    assert result.admitted == 0
    workload.refresh_from_db()
    assert workload.status == "stopped"
    assert not OutboxMessage.objects.filter(topic="workload.dispatch").exists()


def test_snapshot_carries_the_preemptor_of_a_requeued_workload(setup):
    from apps.scheduling.services import scheduling_snapshot

    project, pool = setup
    preemptor = WorkloadFactory(project=project, pool=pool)
    victim = WorkloadFactory(project=project, pool=pool, preempted_by=preemptor)
    pending = {w.id: w for w in scheduling_snapshot().pending}
    assert pending[victim.pk].preempted_by == preemptor.pk and pending[preemptor.pk].preempted_by is None


def test_snapshot_carries_preemption_counts_and_the_options_the_anti_thrash_setting(setup, settings):
    from apps.scheduling.services import policy_options, scheduling_snapshot

    project, pool = setup
    victim = WorkloadFactory(project=project, pool=pool, status="running", preemptions=2,
                             placement=[{"replica": 0, "node": "n1", "gpus": [0]}])
    snapshot = scheduling_snapshot()
    assert {r.id: r.preemptions for r in snapshot.running} == {victim.pk: 2}
    assert policy_options().repreempt_min_runtime_seconds == 3600
    settings.CAIRN = {**settings.CAIRN, "REPREEMPT_MIN_RUNTIME_SECONDS": 0}
    assert policy_options().repreempt_min_runtime_seconds == 0


def test_options_carry_the_gpu_node_reserve_clamped_to_a_share(setup, settings):
    from apps.scheduling.services import policy_options

    assert policy_options().gpu_node_reserve == 0.5
    for configured, used in ((0.0, 0.0), (1.0, 1.0), (2.5, 1.0), (-1.0, 0.0), (float("nan"), 0.5)):
        settings.CAIRN = {**settings.CAIRN, "GPU_NODE_RESERVE": configured}
        assert policy_options().gpu_node_reserve == used


def test_cycles_keep_the_cluster_state_and_apply_what_changed(setup, monkeypatch):
    """The scheduler process keeps the pools' free capacity between cycles: a finished workload
    gives back its GPUs as a delta, and what is admitted then is what a rebuild would admit."""
    from apps.scheduling import services

    project, pool = setup
    kept = ClusterState()
    monkeypatch.setattr(services, "_KEPT", kept)
    first = WorkloadFactory(project=project, pool=pool, gpu_milli=2000, priority=1)
    second = WorkloadFactory(project=project, pool=pool, gpu_milli=2000, priority=2)
    scheduling_cycle()
    first.refresh_from_db()
    assert first.status == "admitted" and kept.stats["rebuilds"] == 1
    scheduling_cycle()  # the admission is applied to the kept state; the second still waits
    assert kept.stats["applied"] == 1
    second.refresh_from_db()
    assert second.status == "queued"
    Workload.objects.filter(pk=first.pk).update(status="succeeded")
    scheduling_cycle()
    second.refresh_from_db()
    assert second.status == "admitted" and second.placement == [{"replica": 0, "node": "n1", "gpus": [0, 1]}]
    assert kept.stats["released"] == 1 and kept.stats["rebuilds"] == 1 and kept.stats["fallbacks"] == 0
