"""The parity scenarios (tests/backends/parity.py) on the Slurm backend: real Slurm jobs, one step
per rank. The stories must be the local backend's and Kubernetes' word for word."""
import pytest

from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.workloads.services import workload_preempt, workload_stop
from tests.backends import parity

from .conftest import on_slurm, reconcile_slurm_until

pytestmark = pytest.mark.django_db(transaction=True)


def _ready(workload) -> bool:
    return "ready" in workload_log_read(workload=workload)


@pytest.fixture
def run(slurm_pool, script):
    def start(source: str, *, nodes=("sn1",), **fields):
        workload = on_slurm(slurm_pool, nodes=nodes, spec={"command": ["python", script(source)], "env": {}}, **fields)
        workload_dispatch(workload_id=workload.pk)
        return workload

    return start


def test_success(run):
    workload = reconcile_slurm_until(run(parity.SUCCEED), "succeeded")
    assert parity.story(workload) == parity.EXPECTED["success"]


def test_failure_and_restart(run):
    workload = reconcile_slurm_until(run(parity.EXIT_3, max_restarts=1), "failed")
    assert parity.story(workload) == parity.EXPECTED["failure_restart"]
    assert workload.runtime["job_name"].endswith("-2")  # attempt 2 was a Slurm job of its own


def test_stop(run):
    workload = reconcile_slurm_until(run(parity.CHECKPOINT_ON_SIGTERM), "running", condition=_ready)
    workload_stop(workload=workload)
    workload_stop_signal(workload_id=workload.pk)
    workload = reconcile_slurm_until(workload, "stopped")
    assert parity.story(workload) == parity.EXPECTED["stop"]
    assert "checkpoint saved" in workload_log_read(workload=workload)  # SIGTERM reached the rank


def test_preemption(run):
    workload = reconcile_slurm_until(run(parity.CHECKPOINT_ON_SIGTERM, nodes=("sn2",)), "running", condition=_ready)
    assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message=parity.PREEMPT_MESSAGE)
    workload_stop_signal(workload_id=workload.pk)
    workload = reconcile_slurm_until(workload, "queued")
    assert parity.story(workload) == parity.EXPECTED["preemption"]


def test_gang_of_2(run):
    workload = reconcile_slurm_until(run(parity.RANK_1_EXITS_3, nodes=("sn1", "sn2")), "failed")
    assert parity.story(workload) == parity.EXPECTED["gang_of_2"]
