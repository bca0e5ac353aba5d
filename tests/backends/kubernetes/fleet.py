"""A fleet on the real control plane for the reconciler's scale test (test_scale.py) and benchmark
(bench/kube_scale.py): kwok GPU nodes, and Cairn's training workloads as rows *and* as pods.

The pods are what Cairn's Jobs would make (the pod template of manifests.training_manifests, so
their size is a real one), created directly and bound to a node (`nodeName`): no Job controller
and no scheduler between, so tens of thousands of them are made in minutes on two CPUs. kwok
marks them Running. With `jobs=True` each workload also gets its Job, created with
`spec.managedBy` set to another controller than the Job controller's (which then leaves it
alone): the reconciler's informer of Jobs holds what it would on a real cluster.
"""
from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client as k8s

from apps.backends.kubernetes import manifests as m

from .controlplane import KWOK_NODE_ANNOTATION

BENCH_MANAGER = "cairn.dev/bench"  # the Jobs' spec.managedBy: not the Job controller's


def kwok_node(name: str, *, gpus: int = 8) -> dict:
    resources = {"cpu": "96", "memory": "1024Gi", "pods": "110", "ephemeral-storage": "2Ti",
                 "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "type": "kwok",
                                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
                                "topology.kubernetes.io/rack": f"rack-{hash(name) % 40}"}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources,
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "kwok",
                                "containerRuntimeVersion": "kwok", "kernelVersion": "", "osImage": "",
                                "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}},
    }


def parallel(fn, items, *, threads: int = 16, retries: int = 5) -> int:
    """fn(item) for every item on `threads` threads; an item whose call fails with a 409 is taken
    as done, 429 / 5xx / 403 (a namespace's service account not there yet) are retried."""
    def one(item):
        for attempt in range(retries):
            try:
                fn(item)
                return 1
            except k8s.ApiException as exc:
                if exc.status == 409:
                    return 1
                if attempt == retries - 1:
                    raise
                time.sleep(0.2 * 2 ** attempt)
        return 0

    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, items))


def admin_api(kubeconfig: dict, *, pool: int = 32) -> k8s.ApiClient:
    from kubernetes import config as k8s_config

    configuration = k8s.Configuration()
    k8s_config.load_kube_config_from_dict(kubeconfig, client_configuration=configuration, persist_config=False)
    configuration.connection_pool_maxsize = pool
    return k8s.ApiClient(configuration)


def create_nodes(api: k8s.ApiClient, count: int, *, prefix: str = "gpu", gpus: int = 8) -> list[str]:
    core = k8s.CoreV1Api(api)
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    parallel(lambda name: core.create_node(kwok_node(name, gpus=gpus), _preload_content=False), names)
    return names


def settled(node: dict) -> bool:
    """Whether the node lifecycle controller is done with a node kwok readied: Ready, its
    `node.kubernetes.io/not-ready` taint gone and its beta os / arch labels added. Those updates
    follow Ready by up to tens of seconds for a hundred nodes (the controller manager's client
    rate limit), more on a loaded machine; they change what Cairn reads (taints, labels)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    labels = (node.get("metadata") or {}).get("labels") or {}
    taints = (node.get("spec") or {}).get("taints") or []
    return (any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints)
            and "beta.kubernetes.io/os" in labels)


def wait_ready(api: k8s.ApiClient, names: list[str], *, timeout: float = 120) -> None:
    """Wait until every node is Ready and settled (see `settled`): a test that counts node syncs
    must not see the controller's late updates as its own."""
    import json

    core = k8s.CoreV1Api(api)
    wanted = set(names)
    ready: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = json.loads(core.list_node(_preload_content=False).data)
        ready = {n["metadata"]["name"] for n in data["items"] if settled(n)}
        if wanted <= ready:
            return
        time.sleep(1)
    raise TimeoutError(f"{len(wanted & ready)} of {len(wanted)} nodes ready and settled")


def ensure_namespace(api: k8s.ApiClient, name: str, *, timeout: float = 60) -> None:
    """The namespace, once its `default` ServiceAccount exists (pods are refused before)."""
    core = k8s.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": name, "labels": {m.LABEL_MANAGED_BY: m.MANAGED_BY}}})
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account("default", name)
            return
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
        time.sleep(0.2)
    raise TimeoutError(f"no default ServiceAccount in {name}")


def training_view(workload_id: int, project: str, *, replicas: int, attempt: int = 1) -> m.WorkloadView:
    return m.WorkloadView(
        id=workload_id, kind="training", name=f"train-{workload_id}", project=project, attempt=attempt,
        replicas=replicas, gpu_milli=1000, cpu_milli=8000, memory_mb=64 * 1024,
        spec={"command": ["torchrun", "--nproc-per-node=1", "train.py", "--epochs", "90"],
              "image": "nvcr.io/nvidia/pytorch:25.01-py3", "env": {"WANDB_MODE": "offline", "DATA": "/data/imagenet"}},
        run_env={"CAIRN_RUN_ID": str(workload_id), "CAIRN_RUN_TOKEN": "x" * 40}, active_deadline_seconds=86400)


def training_objects(view: m.WorkloadView, options: m.ClusterOptions, nodes: list[str]) -> tuple[dict, list[dict]]:
    """(the attempt's Job, its pods as the Job controller would make them, bound to `nodes`)."""
    job = next(o for o in m.training_manifests(view, options) if o["kind"] == "Job")
    job = copy.deepcopy(job)
    template = job["spec"]["template"]
    pods = []
    for index in range(view.replicas):
        labels = {**template["metadata"].get("labels", {}), m.COMPLETION_INDEX_ANNOTATION: str(index),
                  "batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"]}
        annotations = {**template["metadata"].get("annotations", {}), m.COMPLETION_INDEX_ANNOTATION: str(index)}
        spec = copy.deepcopy(template["spec"])
        spec["nodeName"] = nodes[index % len(nodes)]
        spec.pop("affinity", None)
        spec["hostname"] = f"{job['metadata']['name']}-{index}"
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{job['metadata']['name']}-{index}-bench",
                                  "namespace": job["metadata"]["namespace"], "labels": labels,
                                  "annotations": annotations},
                     "spec": spec})
    job["spec"]["managedBy"] = BENCH_MANAGER
    return job, pods


def create_pods(api: k8s.ApiClient, pods: list[dict], *, threads: int = 16) -> int:
    core = k8s.CoreV1Api(api)
    return parallel(lambda pod: core.create_namespaced_pod(pod["metadata"]["namespace"], pod,
                                                           _preload_content=False), pods, threads=threads)


def create_jobs(api: k8s.ApiClient, jobs: list[dict], *, threads: int = 16) -> int:
    batch = k8s.BatchV1Api(api)
    return parallel(lambda job: batch.create_namespaced_job(job["metadata"]["namespace"], job,
                                                            _preload_content=False), jobs, threads=threads)


def running_count(api: k8s.ApiClient, selector: str = m.MANAGED_SELECTOR) -> tuple[int, int]:
    """(pods Running, pods) among Cairn's, from a paginated list."""
    import json

    core = k8s.CoreV1Api(api)
    running = total = 0
    token = None
    while True:
        kwargs = {"label_selector": selector, "limit": 2000}
        if token:
            kwargs["_continue"] = token
        data = json.loads(core.list_pod_for_all_namespaces(_preload_content=False, **kwargs).data)
        total += len(data["items"])
        running += sum(1 for p in data["items"] if (p.get("status") or {}).get("phase") == "Running")
        token = data["metadata"].get("continue")
        if not token:
            return running, total


def workload_rows(*, project, pool, placements: list[list[str]], max_restarts: int = 0) -> list:
    """RUNNING training workloads as the dispatcher leaves them, one per placement (the nodes of
    its replicas); their primary keys come from the database."""
    from django.utils import timezone

    from apps.workloads.models import Workload

    now = timezone.now()
    rows = [Workload(
        project=project, pool=pool, kind="training", name=f"train-{i}", status="running",
        replicas=len(nodes), gpu_milli=1000, cpu_milli=8000, memory_mb=64 * 1024, attempt=1,
        max_restarts=max_restarts, started_at=now, spec={"command": ["torchrun", "train.py"]},
        placement=[{"replica": r, "node": node, "gpus": [r % 8]} for r, node in enumerate(nodes)],
        runtime={"backend": "kubernetes", "attempt": 1, "namespace": f"cairn-{project.slug}", "alive": True,
                 "replicas": [], "objects": []},
    ) for i, nodes in enumerate(placements)]
    rows = Workload.objects.bulk_create(rows, batch_size=1000)
    for row in rows:  # the Job's name needs the primary key
        row.runtime["job"] = m.job_name(row.pk, 1)
    Workload.objects.bulk_update(rows, ["runtime"], batch_size=1000)
    return rows
