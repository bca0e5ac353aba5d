"""Canaries and surge on a Kubernetes cluster, through the real client against the emulated API
server (not a cluster): a canary is a Deployment of its own (`cairn-<id>-canary`, behind its own
Service) that the gateway gives the canary weight; promote and rollback patch and delete the
Deployments; `max_surge` is the Deployment strategy's maxSurge, only for surge replicas Cairn's
scheduler admitted, and the update ends with as many pods as the deployment has."""
import random
from collections import Counter

import pytest

from apps.backends.services import workload_dispatch
from apps.deployments.gateway import split_canary
from apps.deployments.models import DeploymentRollout
from apps.deployments.selectors import deployment_rollout_status, deployment_targets
from apps.deployments.services import (
    deployment_revision_create,
    deployment_rollout_promote,
    deployment_rollout_rollback,
    deployment_rollouts_advance,
)
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload, WorkloadEvent
from tests.factories import QuotaFactory

from .conftest import eventually

NS = "cairn-vision"


def status_of(workload) -> Workload:
    return Workload.objects.select_related("pool__cluster", "project").get(pk=workload.pk)


def until(reconciler, check, timeout=5.0):
    return eventually(check, step=reconciler.reconcile_pass, timeout=timeout)


def deployment(emulator, name):
    return emulator.get("deployments", NS, name)


def revision_of(obj) -> str:
    return obj["spec"]["template"]["metadata"]["annotations"]["cairn.dev/revision"]


def env_of(obj) -> dict:
    [main] = [c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == "main"]
    return {e["name"]: e.get("value") for e in main["env"]}


def running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool, *, replicas):
    QuotaFactory(project=k8s_project, pool=k8s_pool)
    workload = make_workload(kind="deployment", name="model", replicas=replicas, cpu_milli=500, memory_mb=256,
                             spec={"command": ["serve"], "port": 8000, "env": {"V": "1"}})
    workload_dispatch(workload_id=workload.pk)
    name = f"cairn-{workload.pk}"
    assert until(reconciler, lambda: deployment(emulator, name) is not None)
    kubelet.deployment_rolled_out(NS, name)
    assert until(reconciler, lambda: (status_of(workload).runtime.get("main_rollout") or {}).get("complete"))
    return status_of(workload), name


def shares(workload, n=2000) -> Counter:
    """Which revision the gateway's split sends each of n requests to (its own choice, seeded)."""
    rollout = DeploymentRollout.objects.get(workload=workload)
    targets = deployment_targets(status_of(workload))
    random.seed(7)
    return Counter(split_canary(targets, rollout.canary_revision, rollout.canary_weight)[0].revision
                   for _ in range(n))


def test_a_canary_is_a_deployment_of_its_own_with_its_weight_then_promoted(
        reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool):
    """Emulator only: it holds the canary's pod not ready, which needs a kubelet."""
    workload, name = running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool,
                                        replicas=3)
    deployment_revision_create(workload=workload, changes={"env": {"V": "2"}}, strategy="canary", canary_weight=10)
    canary_name = f"{name}-canary"
    assert until(reconciler, lambda: deployment(emulator, canary_name) is not None)
    canary = deployment(emulator, canary_name)
    assert canary["spec"]["replicas"] == 1 and revision_of(canary) == "2" and env_of(canary)["V"] == "2"
    pod_labels = canary["spec"]["template"]["metadata"]["labels"]
    # Not selected by the main Deployment nor the main Service: only the canary's own.
    assert "cairn.dev/workload" not in pod_labels and pod_labels["cairn.dev/canary"] == str(workload.pk)
    assert canary["spec"]["selector"]["matchLabels"] == {"cairn.dev/canary": str(workload.pk)}
    service = emulator.get("services", NS, canary_name)
    assert service["spec"]["selector"] == {"cairn.dev/canary": str(workload.pk)}
    assert emulator.get("services", NS, name)["spec"]["selector"] == {"cairn.dev/workload": str(workload.pk)}
    main = deployment(emulator, name)
    assert main["spec"]["replicas"] == 2 and revision_of(main) == "1"  # the canary takes one of the three

    # Until the canary pod is ready the stable revision takes everything.
    assert until(reconciler, lambda: "canary" in status_of(workload).runtime)
    assert set(shares(workload)) == {1}
    kubelet.deployment_rolled_out(NS, canary_name)
    kubelet.deployment_rolled_out(NS, name)
    assert until(reconciler, lambda: status_of(workload).runtime["canary"]["ready"] == 1)
    targets = deployment_targets(status_of(workload))
    assert {(t.url, t.revision) for t in targets} == {
        (f"http://{canary_name}.{NS}.svc", 2), (f"http://{name}.{NS}.svc", 1)}
    counted = shares(workload)
    assert abs(counted[2] - 200) <= 60 and counted[1] + counted[2] == 2000  # 10% ± 3%
    status = deployment_rollout_status(workload=status_of(workload))
    assert [(r["revision"], r["ready"]) for r in status["replicas"]] == [(1, True), (1, True), (2, True)]
    assert status["complete"] is True

    # Promote: the main Deployment runs revision 2, one replica short while the canary still serves;
    # then the canary goes and the main Deployment has all three.
    deployment_rollout_promote(workload=status_of(workload))
    assert until(reconciler, lambda: revision_of(deployment(emulator, name)) == "2")
    assert deployment(emulator, name)["spec"]["replicas"] == 2 and deployment(emulator, canary_name) is not None
    assert env_of(deployment(emulator, name))["V"] == "2"
    kubelet.deployment_rolled_out(NS, name)
    assert until(reconciler, lambda: deployment(emulator, canary_name) is None)
    assert emulator.get("services", NS, canary_name) is None
    assert until(reconciler, lambda: deployment(emulator, name)["spec"]["replicas"] == 3)
    assert "canary" not in status_of(workload).runtime
    assert {t.revision for t in deployment_targets(status_of(workload))} == {2}
    reasons = list(WorkloadEvent.objects.filter(workload=workload).values_list("reason", flat=True))
    assert reasons.count("CanaryStarted") == 1 and reasons.count("CanaryRemoved") == 1
    assert status_of(workload).replicas == 3 and status_of(workload).status == "running"


@pytest.mark.real_kube
def test_a_canary_rolled_back_is_deleted_and_the_stable_revision_takes_everything(
        reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool):
    workload, name = running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool,
                                        replicas=2)
    deployment_revision_create(workload=workload, changes={"image": "model:2"}, strategy="canary", canary_weight=50)
    canary_name = f"{name}-canary"
    assert until(reconciler, lambda: deployment(emulator, canary_name) is not None)
    kubelet.deployment_rolled_out(NS, canary_name)
    assert until(reconciler, lambda: (status_of(workload).runtime.get("canary") or {}).get("ready"))
    assert deployment(emulator, name)["spec"]["replicas"] == 1

    deployment_rollout_rollback(workload=status_of(workload))
    assert until(reconciler, lambda: deployment(emulator, canary_name) is None)
    assert emulator.get("services", NS, canary_name) is None
    assert until(reconciler, lambda: deployment(emulator, name)["spec"]["replicas"] == 2)
    assert revision_of(deployment(emulator, name)) == "1"
    assert "canary" not in status_of(workload).runtime
    assert set(shares(workload)) == {1}


@pytest.mark.real_kube
def test_a_single_replica_canary_runs_on_a_surge_replica_the_scheduler_admits(
        reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool):
    kubelet.add_node("node-a")
    assert until(reconciler, lambda: k8s_pool.nodes.filter(name="node-a").exists())
    workload, name = running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool,
                                        replicas=1)
    deployment_revision_create(workload=workload, changes={"env": {"V": "2"}}, strategy="canary", canary_weight=10)
    canary_name = f"{name}-canary"
    for _ in range(3):  # no canary pod before the scheduler admits its replica
        reconciler.reconcile_pass()
    assert deployment(emulator, canary_name) is None and deployment(emulator, name)["spec"]["replicas"] == 1

    scheduling_cycle()
    assert status_of(workload).replicas == 2
    assert until(reconciler, lambda: deployment(emulator, canary_name) is not None)
    assert deployment(emulator, name)["spec"]["replicas"] == 1  # the stable one keeps serving

    deployment_rollout_rollback(workload=status_of(workload))  # the surge is released at once
    assert status_of(workload).replicas == 1
    assert until(reconciler, lambda: deployment(emulator, canary_name) is None)
    assert deployment(emulator, name)["spec"]["replicas"] == 1


@pytest.mark.real_kube
def test_max_surge_is_the_controllers_max_surge_for_admitted_replicas_only(
        reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool):
    kubelet.add_node("node-a")
    assert until(reconciler, lambda: k8s_pool.nodes.filter(name="node-a").exists())
    workload, name = running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool,
                                        replicas=2)
    deployment_revision_create(workload=workload, changes={"env": {"V": "2"}}, max_surge=1, max_unavailable=0)
    for _ in range(3):  # max_unavailable 0: the new template waits for the surge to be admitted
        reconciler.reconcile_pass()
    main = deployment(emulator, name)
    assert revision_of(main) == "1"
    assert main["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}

    scheduling_cycle()  # the scheduler admits the surge replica (quota and capacity)
    assert status_of(workload).replicas == 3
    assert until(reconciler, lambda: revision_of(deployment(emulator, name)) == "2")
    main = deployment(emulator, name)
    # Not a third replica: one pod of surge while the controller replaces the two.
    assert main["spec"]["replicas"] == 2
    assert main["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert deployment_rollouts_advance() == 0  # not rolled out yet: the surge is kept
    kubelet.deployment_rolled_out(NS, name)
    assert until(reconciler, lambda: status_of(workload).runtime["main_rollout"]["complete"]
                 and status_of(workload).runtime["main_rollout"]["revision"] == 2)
    assert deployment_rollouts_advance() == 1
    assert status_of(workload).replicas == 2  # the surge's quota is released
    assert until(reconciler, lambda: deployment(emulator, name)["spec"]["strategy"]["rollingUpdate"]
                 == {"maxUnavailable": 1, "maxSurge": 0})
    assert deployment(emulator, name)["spec"]["replicas"] == 2
    assert WorkloadEvent.objects.filter(workload=workload, reason="RolloutComplete").exists()


@pytest.mark.real_kube
def test_a_ready_canary_gets_its_weight_and_promoting_it_rolls_it_out(
        reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool):
    """The canary path of the test above where a controller makes the pods ready (the real
    Deployment and ReplicaSet controllers, kwok's pods): weight, then promote."""
    workload, name = running_deployment(reconciler, make_workload, emulator, kubelet, k8s_project, k8s_pool,
                                        replicas=3)
    deployment_revision_create(workload=workload, changes={"env": {"V": "2"}}, strategy="canary", canary_weight=10)
    canary_name = f"{name}-canary"
    assert until(reconciler, lambda: deployment(emulator, canary_name) is not None, timeout=30)
    assert until(reconciler, lambda: deployment(emulator, name)["spec"]["replicas"] == 2, timeout=30)
    kubelet.deployment_rolled_out(NS, canary_name)
    assert until(reconciler, lambda: (status_of(workload).runtime.get("canary") or {}).get("ready") == 1,
                 timeout=30), status_of(workload).runtime
    assert {(t.url, t.revision) for t in deployment_targets(status_of(workload))} == {
        (f"http://{canary_name}.{NS}.svc", 2), (f"http://{name}.{NS}.svc", 1)}
    counted = shares(workload)
    assert abs(counted[2] - 200) <= 60 and counted[1] + counted[2] == 2000  # 10% ± 3%

    deployment_rollout_promote(workload=status_of(workload))
    assert until(reconciler, lambda: revision_of(deployment(emulator, name)) == "2", timeout=30)
    assert env_of(deployment(emulator, name))["V"] == "2"
    kubelet.deployment_rolled_out(NS, name)
    assert until(reconciler, lambda: deployment(emulator, canary_name) is None, timeout=30)
    assert until(reconciler, lambda: deployment(emulator, name)["spec"]["replicas"] == 3, timeout=30)
    assert emulator.get("services", NS, canary_name) is None
    assert "canary" not in status_of(workload).runtime
    assert {t.revision for t in deployment_targets(status_of(workload))} == {2}
