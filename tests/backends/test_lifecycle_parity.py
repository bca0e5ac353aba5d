"""The parity scenarios (tests/backends/parity.py) on the local backend: real replica processes."""
import pytest

from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.workloads.services import workload_preempt, workload_stop
from tests.backends.helpers import admitted, reconcile_until

from . import parity

pytestmark = pytest.mark.django_db(transaction=True)


def _ready(workload) -> bool:
    return "ready" in workload_log_read(workload=workload)


@pytest.fixture
def run(script):
    def start(source: str, *, replicas: int = 1, **fields):
        workload = admitted(replicas=replicas, spec={"command": ["python", script(source)], "env": {}}, **fields)
        workload_dispatch(workload_id=workload.pk)
        return workload

    return start


def test_success(run):
    workload = reconcile_until(run(parity.SUCCEED), "succeeded")
    assert parity.story(workload) == parity.EXPECTED["success"]


def test_failure_and_restart(run):
    workload = reconcile_until(run(parity.EXIT_3, max_restarts=1), "failed")
    assert parity.story(workload) == parity.EXPECTED["failure_restart"]


def test_stop(run):
    workload = reconcile_until(run(parity.CHECKPOINT_ON_SIGTERM), "running", condition=_ready)
    workload_stop(workload=workload)
    workload_stop_signal(workload_id=workload.pk)
    workload = reconcile_until(workload, "stopped")
    assert parity.story(workload) == parity.EXPECTED["stop"]


def test_preemption(run):
    workload = reconcile_until(run(parity.CHECKPOINT_ON_SIGTERM), "running", condition=_ready)
    assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message=parity.PREEMPT_MESSAGE)
    workload_stop_signal(workload_id=workload.pk)
    workload = reconcile_until(workload, "queued")
    assert parity.story(workload) == parity.EXPECTED["preemption"]


def test_gang_of_2(run):
    workload = reconcile_until(run(parity.RANK_1_EXITS_3, replicas=2), "failed")
    assert parity.story(workload) == parity.EXPECTED["gang_of_2"]
