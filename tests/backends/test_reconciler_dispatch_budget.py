"""The reconciler launches ADMITTED workloads whose dispatch message was lost, but not at the
cost of its other work: every pass first looks at the running workloads, then launches for at
most DISPATCH_SECONDS_PER_PASS (at least one). bench/chaos.py's redis scenario, under load,
once had one pass launch hundreds in a row while no finished replica was seen for minutes."""
import time

import pytest

from apps.backends import services
from apps.backends.local.backend import LocalBackend
from apps.backends.local.paths import replica_exit_path
from apps.backends.local.reconciler import reconcile_once
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload
from tests.backends.helpers import admitted, reconcile_until, wait_for

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)

QUICK = {"command": ["python", "-c", "pass"], "env": {}}


def _statuses(workloads) -> list[str]:
    return [Workload.objects.get(pk=w.pk).status for w in workloads]


def test_a_pass_sees_a_finished_replica_before_it_launches_and_launches_one_when_the_budget_is_spent(monkeypatch):
    monkeypatch.setattr(services, "DISPATCH_SECONDS_PER_PASS", 0.0)
    waiting = [admitted(spec=QUICK) for _ in range(3)]  # their dispatch tasks were lost
    done = admitted(spec=QUICK)  # a later pk: with the old order, looked at after every launch
    workload_dispatch(workload_id=done.pk)
    wait_for(lambda: replica_exit_path(done.pk, 1, 0).exists(), what="the replica to exit")

    reconcile_once()

    assert _statuses([done]) == [S.SUCCEEDED]
    launched = [s for s in _statuses(waiting) if s != S.ADMITTED]
    assert len(launched) == 1, _statuses(waiting)  # at least one, then the spent budget stops it
    for workload in waiting:  # the next passes launch the others
        reconcile_until(workload, S.SUCCEEDED)


def test_slow_launches_stop_a_pass_once_its_budget_is_spent(monkeypatch):
    monkeypatch.setattr(services, "DISPATCH_SECONDS_PER_PASS", 1.0)
    launch = LocalBackend.launch

    def slow_launch(self, *args, **kwargs):  # a launch on a loaded machine (injected latency)
        time.sleep(0.6)
        return launch(self, *args, **kwargs)

    monkeypatch.setattr(LocalBackend, "launch", slow_launch)
    waiting = [admitted(spec=QUICK) for _ in range(6)]

    reconcile_once()

    launched = sum(1 for s in _statuses(waiting) if s != S.ADMITTED)
    assert 1 <= launched <= 3, _statuses(waiting)  # 1 s of 0.6 s launches: two, give or take one
    for workload in waiting:
        reconcile_until(workload, S.SUCCEEDED)
