"""Scaling a deployment with real processes: the autoscaler scales an idle deployment to zero
(replicas drained and stopped, quota released), a request then waits at the gateway during the
cold start and is answered; a scale-up is admitted by the scheduler like any workload and waits,
with a reason, when the quota is full."""
import threading
import time

import httpx
import pytest
from django.db import close_old_connections

from apps.backends.local.reconciler import reconcile_once
from apps.deployments.models import DeploymentScale
from apps.deployments.services import deployment_scale_to
from apps.scheduling.services import scheduling_cycle
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import gone, reconcile_until, replica_processes, wait_for
from tests.deployments.test_serving import _bearer, _deploy, _ready_count, _url
from tests.factories import NodeFactory, QuotaFactory, make_token

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"min_replicas": 0, "max_replicas": 2, "target_concurrency": 5, "stable_window_seconds": 6,
        "panic_window_seconds": 2}


class Loops:
    """The scheduler (with the autoscaler) and the reconciler, running as in server mode."""

    def __init__(self):
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(work,), daemon=True)
                        for work in (scheduling_cycle, reconcile_once)]

    def _run(self, work):
        try:
            while not self.stop.is_set():
                work()
                time.sleep(0.2)
        finally:
            close_old_connections()

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


@pytest.fixture
def capacity(project, pool):
    NodeFactory(pool=pool, name="node-a")
    return QuotaFactory(project=project, pool=pool, nominal_cpu_milli=1000)  # two replicas of 500m


def test_scale_to_zero_then_a_held_request_is_answered_after_the_cold_start(
        settings, gateway_server, project, pool, capacity, bob, script, shared_dir):
    settings.CAIRN = {**settings.CAIRN, "SERVE_METRICS_INTERVAL_SECONDS": 0.5}
    token = make_token(bob)
    workload = _deploy(project, script, shared_dir, replicas=1, gates=[0, 1], autoscaling=FAST)
    reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 1)
    first = replica_processes(workload)
    with httpx.Client(headers=_bearer(token)) as client:
        assert client.get(_url(gateway_server)).status_code == 200
    with Loops():
        # No request for a stable window: down to zero, the replica drained and stopped.
        wait_for(lambda: reconcile_until(workload, S.RUNNING).replicas == 0, timeout=40, interval=0.5,
                 what="scale to zero")
        wait_for(lambda: gone(first), timeout=20, what="the replica to stop")
        workload.refresh_from_db()
        assert workload.status == S.RUNNING and workload.placement == [] and workload.runtime["replicas"] == []
        assert workload.events.filter(reason="ScaledDown").exists()

        started = time.monotonic()
        answer = httpx.get(_url(gateway_server), headers=_bearer(token), timeout=60)
        waited = time.monotonic() - started
    assert answer.status_code == 200 and answer.text == "0", answer.text
    assert waited > 0.3  # it was held while a replica started
    workload.refresh_from_db()
    assert workload.replicas == 1
    assert workload.events.filter(reason="ScaledUp").exists()


def test_a_scale_up_waits_for_quota_with_a_reason_and_scale_down_releases_it_at_once(
        project, pool, capacity, script, shared_dir):
    capacity.nominal_cpu_milli = 500  # room for one replica only
    capacity.save()
    workload = _deploy(project, script, shared_dir, replicas=1, gates=[0, 1])  # scaled by hand here
    deployment_scale_to(workload_id=workload.pk, desired=2, reason="test")
    scheduling_cycle()
    workload.refresh_from_db()
    assert workload.replicas == 1
    row = DeploymentScale.objects.get(workload=workload)
    assert row.desired == 2 and row.pending_reason.startswith("Scale-up waits:") and "quota" in row.pending_reason
    assert workload.pending_reason == row.pending_reason and workload.waiting_on

    capacity.nominal_cpu_milli = 1000
    capacity.save()
    scheduling_cycle()
    workload.refresh_from_db()
    assert workload.replicas == 2 and len(workload.placement) == 2 and workload.pending_reason == ""
    reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 2)

    deployment_scale_to(workload_id=workload.pk, desired=1, reason="test")
    workload.refresh_from_db()
    assert workload.replicas == 1 and [p["replica"] for p in workload.placement] == [0]
    reconcile_until(workload, S.RUNNING, condition=lambda w: len(w.runtime["replicas"]) == 1)
    drained = workload.runtime["draining"]
    assert [r["replica"] for r in drained] == [1]
