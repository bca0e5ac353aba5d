"""The lifecycle decisions exist once (apps.workloads.lifecycle): the parity scenarios of
tests/backends/parity.py told by the Kubernetes backend (the emulated API server, or the real
control plane for the tests marked real_kube) end in the same events and transitions, reasons,
messages and exit code as on the local backend (real replica processes, driven here side by side
for two of them and in tests/backends/test_lifecycle_parity.py for all) and on Slurm
(tests/backends/slurm/test_lifecycle_parity.py)."""
import pytest

from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.workloads.models import Workload
from apps.workloads.services import workload_preempt, workload_stop
from tests.backends import parity
from tests.backends.helpers import admitted, reconcile_until

from .conftest import eventually

pytestmark = pytest.mark.django_db(transaction=True)
NS = "cairn-vision"
story = parity.story


def _until(reconciler, workload, status: str) -> Workload:
    assert eventually(lambda: Workload.objects.get(pk=workload.pk).status == status, step=reconciler.reconcile_pass)
    return workload


def _running(make_workload, kubelet, *, replicas: int = 1) -> tuple[Workload, list[str]]:
    workload = make_workload(replicas=replicas)
    workload_dispatch(workload_id=workload.pk)
    pods = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-1")
    for pod in pods:
        kubelet.running(NS, pod)
    return workload, pods


def test_a_failing_attempt_restarts_then_fails_the_same_way_on_both_backends(
        script, reconciler, make_workload, kubelet):
    """Emulator only: it reads the emulator's store (kubelet.emulator)."""
    # local: every attempt of replica 0 exits with code 3; one restart allowed
    path = script(parity.EXIT_3)
    local = admitted(spec={"command": ["python", path], "env": {}}, max_restarts=1)
    workload_dispatch(workload_id=local.pk)
    reconcile_until(local, "failed")

    # Kubernetes: the kubelet reports the same exits, attempt by attempt
    remote = make_workload(max_restarts=1)
    workload_dispatch(workload_id=remote.pk)
    for attempt in (1, 2):
        [pod] = kubelet.start_job_pods(NS, f"cairn-{remote.pk}-{attempt}")
        kubelet.terminated(NS, pod, exit_code=3)
        if attempt == 1:
            assert eventually(lambda: Workload.objects.get(pk=remote.pk).attempt == 2, step=reconciler.reconcile_pass)
            # attempt 2's Job: once attempt 1's pods are gone and the restart's backoff passed
            assert eventually(lambda: kubelet.emulator.get("jobs", NS, f"cairn-{remote.pk}-2") is not None,
                              step=reconciler.reconcile_pass)
    _until(reconciler, remote, "failed")

    assert story(local) == parity.EXPECTED["failure_restart"]
    assert story(remote) == story(local)


@pytest.mark.real_kube
def test_a_preempted_workload_goes_back_to_the_queue_the_same_way_on_both_backends(
        script, reconciler, make_workload, kubelet):
    # local: a replica that exits on SIGTERM
    path = script("import time; print('ready', flush=True); time.sleep(60)")
    local = admitted(spec={"command": ["python", path], "env": {}})
    workload_dispatch(workload_id=local.pk)
    # Kubernetes: a running pod, deleted with its Job on SIGTERM
    remote, _ = _running(make_workload, kubelet)

    for workload in (local, remote):
        assert workload_preempt(workload_id=workload.pk, preemptor_id=None, message=parity.PREEMPT_MESSAGE)
        workload_stop_signal(workload_id=workload.pk)
    reconcile_until(local, "queued", timeout=10)
    _until(reconciler, remote, "queued")

    assert story(local) == parity.EXPECTED["preemption"]
    assert story(remote) == story(local)


def test_success(reconciler, make_workload, kubelet):
    workload, [pod] = _running(make_workload, kubelet)
    kubelet.terminated(NS, pod, exit_code=0)
    assert story(_until(reconciler, workload, "succeeded")) == parity.EXPECTED["success"]


@pytest.mark.real_kube
def test_stop(reconciler, make_workload, kubelet):
    workload, _ = _running(make_workload, kubelet)
    workload_stop(workload=workload)
    workload_stop_signal(workload_id=workload.pk)
    assert story(_until(reconciler, workload, "stopped")) == parity.EXPECTED["stop"]


def test_gang_of_2(reconciler, make_workload, kubelet):
    workload, pods = _running(make_workload, kubelet, replicas=2)
    kubelet.terminated(NS, pods[1], exit_code=3)  # rank 0 runs on: the gang fails for rank 1
    assert story(_until(reconciler, workload, "failed")) == parity.EXPECTED["gang_of_2"]
