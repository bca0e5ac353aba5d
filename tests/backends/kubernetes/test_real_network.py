"""Network profiles and rendezvous (issue 42, Found 5), on the real control plane: a pool's
profile (RDMA resource, Multus network, IPC_LOCK, a RuntimeClass, Pod Security "privileged")
reaches the training pods, the API server admits them (Pod Security, RuntimeClass admission),
kube-scheduler binds them where the RDMA resource is, and each carries torchrun's PET_* env."""
import itertools

import pytest
from kubernetes import client as k8s

from apps.backends.kubernetes import manifests as m
from apps.backends.services import workload_dispatch
from apps.clusters.models import NetworkProfile

from .conftest import _node_object, eventually

WAIT = 60
RDMA = "rdma/hca_shared_devices_a"
_names = itertools.count(1)


@pytest.fixture
def rdma_node(real_kube):
    """A kwok GPU node that also offers the RDMA device plugin's resource, and a RuntimeClass."""
    name = f"ib-{next(_names)}"
    node = _node_object({"name": name, "resource": "nvidia.com/gpu", "count": 8, "labels": {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "cairn.test/fabric": name}})
    for key in ("capacity", "allocatable"):
        node["status"][key][RDMA] = "100"
    real_kube.core.create_node(node)
    node_api = k8s.NodeV1Api(real_kube.api)
    try:
        node_api.create_runtime_class({"metadata": {"name": "rdma-runc"}, "handler": "runc"})
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    ready = lambda: any(c.type == "Ready" and c.status == "True"  # noqa: E731
                        for c in real_kube.core.read_node(name).status.conditions or [])
    assert eventually(ready, timeout=WAIT)
    yield name
    real_kube.core.delete_node(name)


def test_a_pools_network_profile_reaches_the_pods_and_the_api_server_admits_them(
        real_kube, real_reconciler, make_real_workload, real_pool, rdma_node):
    profile = NetworkProfile(name="infiniband", resources={RDMA: 1}, networks=["ib-net"], capabilities=["IPC_LOCK"],
                             runtime_class_name="rdma-runc", pod_security_level="privileged",
                             env={"NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "eth0"})
    profile.full_clean()
    profile.save()
    real_pool.network_profile = profile
    real_pool.save(update_fields=["network_profile"])
    workload = make_real_workload(replicas=2, gpu_milli=2000, spec={"command": ["torchrun", "train.py"], "env": {}})
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    namespace = f"cairn-{workload.project.slug}"
    labels = real_kube.core.read_namespace(namespace).metadata.labels
    assert labels[m.POD_SECURITY_ENFORCE] == "privileged"  # what IPC_LOCK needs
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"  # still warned and audited

    def running():
        pods = [p for p in real_kube.pods(namespace, f"{m.LABEL_WORKLOAD}={workload.pk}") if p.status.phase == "Running"]
        return pods if len(pods) == 2 else None

    pods = eventually(running, step=real_reconciler.reconcile_pass, timeout=WAIT)
    assert pods, real_kube.describe(namespace)
    for pod in pods:
        assert pod.spec.node_name == rdma_node  # the only node with the RDMA resource
        assert pod.metadata.annotations[m.MULTUS_ANNOTATION] == "ib-net"
        assert pod.spec.runtime_class_name == "rdma-runc"
        main = pod.spec.containers[0]
        assert main.resources.limits[RDMA] == "1" and main.resources.requests[RDMA] == "1"
        assert main.security_context.capabilities.add == ["IPC_LOCK"]
        assert main.security_context.capabilities.drop == ["ALL"] and main.security_context.run_as_non_root
        assert not main.security_context.privileged and not pod.spec.host_network
        env = {e.name: e.value for e in main.env}
        assert env["NCCL_IB_HCA"] == "mlx5"
        assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_MASTER_PORT"]) == ("2", "2", "29500")
        assert env["PET_MASTER_ADDR"] == env["MASTER_ADDR"] == f"cairn-{workload.pk}-1-0.cairn-{workload.pk}"
        node_rank = next(e for e in main.env if e.name == "PET_NODE_RANK")
        assert m.COMPLETION_INDEX_ANNOTATION in node_rank.value_from.field_ref.field_path
        assert main.command[:2] == ["/bin/sh", "-c"] and main.command[-2:] == ["torchrun", "train.py"]

    # The same pod in a namespace that enforces "restricted" is refused: the level is what admits it.
    pod_spec = real_kube.batch.read_namespaced_job(f"cairn-{workload.pk}-1", namespace).spec.template.spec
    strict = f"strict-{next(_names)}"
    real_kube.core.create_namespace({"metadata": {"name": strict, "labels": {m.POD_SECURITY_ENFORCE: "restricted"}}})
    try:
        body = real_kube.api.sanitize_for_serialization(pod_spec)
        body.pop("schedulingGates", None)
        with pytest.raises(k8s.ApiException) as refused:
            real_kube.core.create_namespaced_pod(strict, {"metadata": {"name": "probe"}, "spec": body}, dry_run="All")
        assert refused.value.status == 403 and "IPC_LOCK" in refused.value.body
    finally:
        real_kube.core.delete_namespace(strict)
