"""The level-triggered reconciler against the emulated API server: list + watch caches, pod
phases and failures to workload status and conditions, stop, node inventory, 410s, faults, and a
reconciler killed and restarted mid-stream."""
import pytest

from apps.backends.kubernetes.reconciler import ClusterReconciler
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.clusters.models import Node
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.services import workload_stop

from .conftest import eventually

NS = "cairn-vision"


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def until(reconciler, check, timeout=5.0):
    return eventually(check, step=reconciler.reconcile_pass, timeout=timeout)


def condition(workload, ctype) -> dict:
    return {c["type"]: c for c in status_of(workload).conditions}.get(ctype, {})


def running_training(make_workload, kubelet, **fields):
    workload = make_workload(**fields)
    workload_dispatch(workload_id=workload.pk)
    pods = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-{status_of(workload).attempt}")
    return workload, pods


@pytest.mark.real_kube
def test_running_then_succeeded_pods_finish_the_workload(reconciler, make_workload, kubelet):
    workload, pods = running_training(make_workload, kubelet, replicas=2)
    for pod in pods:
        kubelet.running(NS, pod)
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    assert status_of(workload).status == "running"
    kubelet.terminated(NS, pods[0], exit_code=0)
    reconciler.reconcile_pass()
    assert status_of(workload).status == "running"  # one of two done
    kubelet.terminated(NS, pods[1], exit_code=0)
    assert until(reconciler, lambda: status_of(workload).status == "succeeded")
    assert status_of(workload).exit_code == 0


@pytest.mark.real_kube
def test_a_failed_pod_fails_the_gang_with_its_exit_code(reconciler, make_workload, kubelet):
    workload, pods = running_training(make_workload, kubelet, replicas=2)
    kubelet.running(NS, pods[0])
    kubelet.terminated(NS, pods[1], exit_code=3)
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    workload = status_of(workload)
    assert workload.exit_code == 3 and workload.status_reason == "ReplicaFailed"
    assert workload.status_message == "Replica 1 exited with code 3."


@pytest.mark.real_kube
def test_oom_killed_is_named_as_such(reconciler, make_workload, kubelet):
    workload, pods = running_training(make_workload, kubelet, memory_mb=256)
    kubelet.terminated(NS, pods[0], exit_code=137, reason="OOMKilled")
    assert until(reconciler, lambda: status_of(workload).status == "failed")
    workload = status_of(workload)
    assert workload.status_reason == "OOMKilled" and workload.exit_code == 137
    assert "out of memory (OOMKilled, limit 256Mi)" in workload.status_message


@pytest.mark.real_kube
def test_a_failed_attempt_restarts_as_a_new_job_while_restarts_remain(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, replicas=1, max_restarts=1)
    kubelet.terminated(NS, pods[0], exit_code=1)
    assert until(reconciler, lambda: status_of(workload).attempt == 2)
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is None  # old attempt deleted
    # the new Job once every pod of the old one is gone and the restart's backoff passed
    assert until(reconciler, lambda: emulator.get("jobs", NS, f"cairn-{workload.pk}-2") is not None)
    assert WorkloadEvent.objects.filter(workload=workload, reason="Restarting").exists()
    assert status_of(workload).status == "running"
    [pod] = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-2")
    kubelet.terminated(NS, pod, exit_code=0)
    assert until(reconciler, lambda: status_of(workload).status == "succeeded")


def test_image_pull_backoff_becomes_a_human_condition_and_event(reconciler, make_workload, kubelet):
    """Emulator only: an image pull back-off needs a kubelet."""
    workload, pods = running_training(make_workload, kubelet)
    kubelet.waiting(NS, pods[0], reason="ImagePullBackOff", message='Back-off pulling image "registry.example/typo:1"')
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("reason") == "ImagePullBackOff")
    message = condition(workload, "ContainersReady")["message"]
    assert message.startswith("Replica 0 cannot pull image 'registry.example/typo:1'")
    assert WorkloadEvent.objects.filter(workload=workload, reason="ImagePullBackOff", type="Warning").count() == 1
    reconciler.reconcile_pass()
    assert WorkloadEvent.objects.filter(workload=workload, reason="ImagePullBackOff").count() == 1  # once
    assert status_of(workload).status == "running"


def test_unschedulable_pods_explain_why_with_the_schedulers_event(reconciler, make_workload, kubelet, emulator):
    """Emulator only: the scheduler's verdict written by hand (test_real_cluster.py has kube-scheduler's own)."""
    workload, pods = running_training(make_workload, kubelet, gpu_milli=8000)
    kubelet.unschedulable(NS, pods[0], "0/3 nodes are available.")
    emulator.create("events", {
        "metadata": {"name": "ev1", "namespace": NS}, "type": "Warning", "reason": "FailedScheduling",
        "involvedObject": {"kind": "Pod", "name": pods[0], "namespace": NS},
        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", "lastTimestamp": "2026-01-01T00:00:00Z",
    }, NS)
    assert until(reconciler, lambda: "Insufficient nvidia.com/gpu" in condition(workload, "PodScheduled").get(
        "message", ""))
    cond = condition(workload, "PodScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == "Replica 0 cannot be scheduled: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


@pytest.mark.real_kube
def test_stop_training_deletes_the_job_and_ends_stopped(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet, replicas=2)
    for pod in pods:
        kubelet.running(NS, pod)
    workload_stop(workload=status_of(workload))
    workload_stop_signal(workload_id=workload.pk)
    assert until(reconciler, lambda: status_of(workload).status == "stopped")
    assert emulator.list("jobs", NS) == []


@pytest.mark.real_kube
def test_stop_whose_task_was_lost_is_carried_out_by_the_reconciler(reconciler, make_workload, kubelet, emulator):
    workload, pods = running_training(make_workload, kubelet)
    workload_stop(workload=status_of(workload))  # the outbox's stop task never runs
    assert until(reconciler, lambda: status_of(workload).status == "stopped")
    assert emulator.list("jobs", NS) == []


def test_notebook_stop_scales_to_zero_and_forces_pods_after_the_grace_period(reconciler, make_workload, kubelet,
                                                                            emulator):
    """Emulator only: a pod that outlives SIGTERM needs a kubelet (kwok ends pods at once)."""
    workload = make_workload(kind="notebook", spec={"env": {}})
    workload_dispatch(workload_id=workload.pk)
    [pod] = kubelet.start_set_pods(NS, "StatefulSet", f"cairn-{workload.pk}")
    kubelet.running(NS, pod)
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    workload_stop(workload=status_of(workload))
    workload_stop_signal(workload_id=workload.pk)
    assert emulator.get("statefulsets", NS, f"cairn-{workload.pk}")["spec"]["replicas"] == 0
    # The pod ignores SIGTERM: after the grace period (0.5s in tests) it is deleted with no grace.
    assert until(reconciler, lambda: status_of(workload).status == "stopped")
    assert "killed after the 0.5s grace period" in status_of(workload).status_message
    assert emulator.list("pods", NS) == []


@pytest.mark.real_kube
def test_a_job_deleted_behind_cairns_back_is_lost(reconciler, make_workload, emulator):
    workload = make_workload()
    workload_dispatch(workload_id=workload.pk)
    emulator.delete("jobs", NS, f"cairn-{workload.pk}-1")
    assert until(reconciler, lambda: status_of(workload).status == "lost")
    assert "disappeared" in status_of(workload).status_message


@pytest.mark.real_kube
def test_a_deployment_deleted_behind_cairns_back_is_created_again(reconciler, make_workload, emulator):
    workload = make_workload(kind="deployment", spec={"command": ["serve"], "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    emulator.delete("deployments", NS, f"cairn-{workload.pk}")
    assert until(reconciler, lambda: emulator.get("deployments", NS, f"cairn-{workload.pk}") is not None)
    assert WorkloadEvent.objects.filter(workload=workload, reason="Recreated").exists()
    assert status_of(workload).status == "running"


@pytest.mark.real_kube
def test_cairns_autoscaler_sets_the_deployments_replicas_without_an_hpa(reconciler, make_workload, emulator):
    workload = make_workload(kind="deployment", replicas=2, spec={"command": ["serve"], "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    assert emulator.get("horizontalpodautoscalers", NS, f"cairn-{workload.pk}") is None
    Workload.objects.filter(pk=workload.pk).update(replicas=3)  # a scale-up admitted by the scheduler
    assert until(reconciler, lambda: emulator.get("deployments", NS, f"cairn-{workload.pk}")["spec"]["replicas"] == 3)
    Workload.objects.filter(pk=workload.pk).update(replicas=0)  # scaled to zero
    assert until(reconciler, lambda: emulator.get("deployments", NS, f"cairn-{workload.pk}")["spec"]["replicas"] == 0)
    assert status_of(workload).status == "running"


@pytest.mark.real_kube
def test_crash_looping_deployment_pod_that_ran_out_of_memory(reconciler, make_workload, kubelet):
    workload = make_workload(kind="deployment", spec={"command": ["serve"], "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    [pod] = kubelet.start_set_pods(NS, "Deployment", f"cairn-{workload.pk}")

    def crash_loop_then_reconcile():
        # Again at every pass: on the real control plane kwok may write the pod's status back to
        # ready between our patch and the reconciler's look (it did on a loaded machine).
        kubelet.core.patch_namespaced_pod_status(pod, NS, {"status": {"phase": "Running", "containerStatuses": [{
            "name": "main", "image": "img", "imageID": "", "ready": False, "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}})
        reconciler.reconcile_pass()

    assert eventually(lambda: condition(workload, "ContainersReady").get("reason") == "OOMKilled",
                      step=crash_loop_then_reconcile, timeout=15)
    assert "keeps running out of memory" in condition(workload, "ContainersReady")["message"]
    assert status_of(workload).status == "running"


@pytest.mark.real_kube
def test_an_admitted_workload_whose_dispatch_was_lost_is_dispatched(reconciler, make_workload, emulator):
    workload = make_workload()
    assert until(reconciler, lambda: status_of(workload).status == "running")
    assert emulator.get("jobs", NS, f"cairn-{workload.pk}-1") is not None


# -- nodes ---------------------------------------------------------------------------------------

def test_nodes_added_cordoned_not_ready_and_removed_are_reflected(reconciler, kubelet, k8s_pool, emulator):
    """Emulator only: a NotReady node on demand (kwok readies every node it manages)."""
    kubelet.add_node("gpu-a", gpus=8, labels={"topology.kubernetes.io/rack": "rack-7"})
    assert until(reconciler, lambda: Node.objects.filter(name="gpu-a").exists())
    node = Node.objects.get(name="gpu-a")
    assert node.cluster_id == k8s_pool.cluster_id and node.pool_id == k8s_pool.pk
    assert (node.gpu_count, node.gpu_model, node.gpu_memory_mb) == (8, "NVIDIA-H100-80GB-HBM3", 81559)
    assert node.cpu_milli_allocatable == 95500 and node.memory_mb_allocatable == 1000 * 1024
    assert node.topology_domain == "rack-7"
    assert node.health == "healthy" and node.schedulable is True

    kubelet.core.patch_node("gpu-a", {"spec": {"unschedulable": True}})
    assert until(reconciler, lambda: not Node.objects.get(name="gpu-a").schedulable)
    kubelet.core.patch_node_status("gpu-a", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert until(reconciler, lambda: Node.objects.get(name="gpu-a").health == "unhealthy")

    kubelet.core.delete_node("gpu-a")
    assert until(reconciler, lambda: not Node.objects.filter(name="gpu-a").exists())


@pytest.mark.real_kube
def test_a_cordon_cairn_holds_survives_the_node_sync_until_uncordoned(reconciler, kubelet, k8s_pool):
    from apps.clusters.services import node_cordon, node_uncordon

    kubelet.add_node("gpu-b", gpus=8)
    assert until(reconciler, lambda: Node.objects.filter(name="gpu-b", health="healthy").exists())
    node_cordon(node=Node.objects.get(name="gpu-b"), reason="GpuXidError", message="XID 79 on GPU 3.",
                health="unhealthy")
    # The Kubernetes Node still says schedulable and Ready; Cairn's cordon and health stay.
    kubelet.core.patch_node("gpu-b", {"metadata": {"labels": {"touched": "yes"}}})
    assert until(reconciler, lambda: Node.objects.get(name="gpu-b").labels.get("touched") == "yes")
    node = Node.objects.get(name="gpu-b")
    assert (node.schedulable, node.health, node.cordon_reason) == (False, "unhealthy", "GpuXidError")

    node_uncordon(node=node)
    assert until(reconciler, lambda: Node.objects.get(name="gpu-b").health == "healthy")
    assert Node.objects.get(name="gpu-b").schedulable is True


@pytest.mark.real_kube
def test_nodes_go_to_the_pool_whose_selector_they_match(reconciler, kubelet, k8s_cluster):
    from tests.factories import PoolFactory

    a100 = PoolFactory(cluster=k8s_cluster, name="a100", node_selector={"pool": "a100"})
    PoolFactory(cluster=k8s_cluster, name="h100", node_selector={"pool": "h100"})
    kubelet.add_node("n1", labels={"pool": "a100"})
    assert until(reconciler, lambda: Node.objects.filter(name="n1", pool=a100).exists())


# -- watches, 410 and faults ---------------------------------------------------------------------

def test_410_gone_mid_stream_relists_and_keeps_converging(reconciler, make_workload, kubelet, emulator):
    """Emulator only: watch expiry and 410 compaction on demand."""
    workload, pods = running_training(make_workload, kubelet)
    kubelet.running(NS, pods[0])
    assert until(reconciler, lambda: condition(workload, "ContainersReady").get("status") == "True")
    pod_informer = reconciler.informers["pods"]
    lists_before = pod_informer.lists
    emulator.expire_watches()
    assert eventually(lambda: pod_informer.gone >= 1 and pod_informer.lists > lists_before)
    kubelet.terminated(NS, pods[0], exit_code=0)
    assert until(reconciler, lambda: status_of(workload).status == "succeeded")


def test_informer_resumes_from_its_resource_version_and_relists_when_it_expired(k8s_cluster, emulator, kubelet):
    """Emulator only: 410 compaction on demand."""
    from apps.backends.kubernetes.client import clients_for
    from apps.backends.kubernetes.informer import Informer

    clients = clients_for(k8s_cluster)
    informer = Informer(clients, "nodes", clients.core.list_node, watch_timeout=1)
    kubelet.add_node("a")
    informer.step()  # list
    assert [n["metadata"]["name"] for n in informer.items()] == ["a"]
    listed_at = informer.resource_version
    kubelet.add_node("b")
    informer.step()  # watch from the list's version: sees only what came after
    assert sorted(n["metadata"]["name"] for n in informer.items()) == ["a", "b"]
    assert int(informer.resource_version) > int(listed_at) and informer.lists == 1
    informer.resource_version = listed_at  # as if this watcher had fallen behind...
    emulator.compact()  # ...and the server compacted its history
    kubelet.core.delete_node("a")
    informer.step()
    assert informer.gone == 1 and informer.lists == 2
    assert [n["metadata"]["name"] for n in informer.items()] == ["b"]


def test_list_and_watch_survive_server_errors(k8s_cluster, emulator, kubelet, make_workload):
    """Emulator only: a real server's 5xx cannot be injected on demand."""
    emulator.fail("GET", "/pods", 500, times=4)  # more than one call's retries
    emulator.fail("GET", "/nodes", 503, times=2)
    reconciler = ClusterReconciler(k8s_cluster, watch_timeout=1)
    reconciler.start()
    try:
        assert eventually(lambda: reconciler.synced, timeout=8)
        kubelet.add_node("late")
        assert until(reconciler, lambda: Node.objects.filter(name="late").exists())
    finally:
        reconciler.stop(timeout=0)


def test_reconciler_killed_and_restarted_mid_stream_converges(start_reconciler, make_workload, kubelet, emulator):
    """Emulator only: history compacted on demand, and it counts the cluster's nodes (the real one has the session's)."""
    first = start_reconciler()
    done, _ = running_training(make_workload, kubelet, replicas=1)
    failing, failing_pods = running_training(make_workload, kubelet, replicas=1)
    kubelet.add_node("gpu-a")
    kubelet.add_node("gpu-b")
    assert until(first, lambda: Node.objects.filter(cluster__name="gpu-cluster").count() == 2)
    first.stop(timeout=0)  # killed: its caches and watches are gone

    # While no reconciler runs: pods finish, a node goes, another is cordoned, history is compacted.
    done_pods = [p["metadata"]["name"] for p in emulator.list("pods", NS,
                                                              label_selector=f"cairn.dev/workload={done.pk}")]
    kubelet.terminated(NS, done_pods[0], exit_code=0)
    kubelet.terminated(NS, failing_pods[0], exit_code=2)
    kubelet.core.delete_node("gpu-a")
    kubelet.core.patch_node("gpu-b", {"spec": {"unschedulable": True}})
    emulator.compact()

    second = start_reconciler()
    assert until(second, lambda: status_of(done).status == "succeeded" and status_of(failing).status == "failed")
    assert status_of(failing).exit_code == 2
    assert list(Node.objects.filter(cluster__name="gpu-cluster").values_list("name", "schedulable")) == [
        ("gpu-b", False)]
    # A second pass changes nothing: the state has converged.
    events = WorkloadEvent.objects.count()
    assert second.reconcile_pass() == 0
    assert WorkloadEvent.objects.count() == events


@pytest.mark.real_kube
def test_new_credentials_restart_the_clusters_watches(k8s_cluster, emulator):
    import yaml

    from apps.backends.kubernetes.reconciler import KubernetesReconciler
    from apps.clusters.services import kubernetes_cluster_register

    manager = KubernetesReconciler(watch_timeout=1)
    try:
        manager.refresh()
        first = manager.clusters[k8s_cluster.pk]
        manager.refresh()
        assert manager.clusters[k8s_cluster.pk] is first  # unchanged credentials: same watches
        kubernetes_cluster_register(name=k8s_cluster.name, kubeconfig=yaml.safe_dump(emulator.kubeconfig()))
        manager.refresh()
        assert manager.clusters[k8s_cluster.pk] is not first and first.stop_event.is_set()
    finally:
        for reconciler in manager.clusters.values():
            reconciler.stop(timeout=0)


@pytest.mark.real_kube
def test_a_new_revision_is_rolled_out_through_the_deployments_pod_template(reconciler, make_workload, emulator,
                                                                             k8s_project, k8s_pool):
    from apps.deployments.services import deployment_revision_create
    from tests.factories import QuotaFactory

    QuotaFactory(project=k8s_project, pool=k8s_pool)
    workload = make_workload(kind="deployment", replicas=2, cpu_milli=500, memory_mb=256,
                             spec={"command": ["serve"], "port": 8000, "env": {"V": "1"}})
    workload_dispatch(workload_id=workload.pk)
    name = f"cairn-{workload.pk}"
    assert until(reconciler, lambda: emulator.get("deployments", NS, name) is not None)
    before = emulator.get("deployments", NS, name)["spec"]["template"]
    assert before["metadata"]["annotations"]["cairn.dev/revision"] == "1"
    deployment_revision_create(workload=status_of(workload), changes={"env": {"V": "2"}, "image": "model:2",
                                                                      "resources": {"cpu_milli": 1000}},
                               max_unavailable=2)

    def rolled_out():
        template = emulator.get("deployments", NS, name)["spec"]["template"]
        return template["metadata"]["annotations"]["cairn.dev/revision"] == "2" and template

    template = until(reconciler, rolled_out)
    [main] = [c for c in template["spec"]["containers"] if c["name"] == "main"]
    assert {e["name"]: e.get("value") for e in main["env"]}["V"] == "2" and main["image"] == "model:2"
    assert main["resources"]["requests"]["cpu"] in ("1", "1000m")
    assert template["metadata"]["labels"] == before["metadata"]["labels"]
    deployment = emulator.get("deployments", NS, name)
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 2, "maxSurge": 0}
    assert deployment["spec"]["replicas"] == 2
    for _ in range(5):  # level-triggered, and said once
        reconciler.reconcile_pass()
    assert WorkloadEvent.objects.filter(workload=workload, reason="RolloutStarted").count() == 1
    assert status_of(workload).status == "running" and status_of(workload).cpu_milli == 1000
