"""A gang restart on Kubernetes is a durable claim, the dispatcher's own protocol
(apps.backends.services.workload_restart_launch): the claim of attempt n+1 (its run token
included) commits before its Job is created; a reconciler killed in between leaves the claim,
and the next pass resumes the same attempt (event LaunchResumed) with the same run token."""
import base64

import pytest

from apps.backends.kubernetes import backend as kube_backend
from apps.backends.kubernetes import manifests as m
from apps.workloads.models import WorkloadEvent
from tests.backends.kubernetes.test_reconciler import NS, running_training, status_of, until

pytestmark = pytest.mark.django_db(transaction=True)


class Killed(BaseException):
    """The reconciler process dying mid-launch (not an error it could handle)."""


def test_a_reconciler_killed_mid_restart_leaves_a_claim_the_next_pass_resumes(
        reconciler, make_workload, kubelet, emulator, monkeypatch):
    workload, [pod] = running_training(make_workload, kubelet, replicas=1, max_restarts=1)
    kubelet.terminated(NS, pod, exit_code=3)
    assert until(reconciler, lambda: status_of(workload).attempt == 2)

    real_launch = kube_backend.KubernetesBackend.launch
    kills = []

    def killed_launch(self, workload, **kwargs):
        kills.append(kwargs.get("attempt"))
        raise Killed()

    monkeypatch.setattr(kube_backend.KubernetesBackend, "launch", killed_launch)
    with pytest.raises(Killed):
        until(reconciler, lambda: False, timeout=10)
    assert kills == [2]
    claimed = status_of(workload)
    claim = claimed.runtime["launching"]
    assert claimed.status == "running" and claim["env"]["CAIRN_RUN_TOKEN"]  # committed before the launch
    assert emulator.get("jobs", NS, m.job_name(workload.pk, 2)) is None

    monkeypatch.setattr(kube_backend.KubernetesBackend, "launch", real_launch)
    assert until(reconciler, lambda: emulator.get("jobs", NS, m.job_name(workload.pk, 2)) is not None)
    assert until(reconciler, lambda: "launching" not in status_of(workload).runtime)
    resumed = WorkloadEvent.objects.filter(workload=workload, reason="LaunchResumed")
    assert resumed.count() == 1 and "attempt 2" in resumed.get().message
    secret = emulator.get("secrets", NS, m.run_secret_name(workload.pk, 2))
    token = (secret.get("stringData") or {}).get("CAIRN_RUN_TOKEN") or base64.b64decode(
        secret["data"]["CAIRN_RUN_TOKEN"]).decode()
    assert token == claim["env"]["CAIRN_RUN_TOKEN"]  # the claimed attempt, not a new one
    assert status_of(workload).runtime["job"] == m.job_name(workload.pk, 2)
