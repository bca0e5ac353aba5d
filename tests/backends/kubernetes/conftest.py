"""Fixtures for the Kubernetes backend: an emulated API server per test (real HTTP), a cluster
registered with its kubeconfig (so credentials go through encryption and the real client), and
a `kubelet` that plays the job controller and the kubelet through the API."""
import time
from datetime import UTC

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.backends.kubernetes import client as cairn_client
from apps.backends.kubernetes import manifests as m
from apps.clusters.services import kubernetes_cluster_register
from tests.factories import PoolFactory, ProjectFactory, WorkloadFactory

from .emulator import KubeEmulator

TOKEN = "emulated-token-123"


@pytest.fixture(autouse=True)
def _fast_kubernetes_client(settings):
    settings.CAIRN_KUBERNETES = {
        **cairn_client.kube_settings(),
        "CONNECT_TIMEOUT": 1.0, "REQUEST_TIMEOUT": 1.0, "RETRIES": 2, "RETRY_BACKOFF": 0.01,
        "RETRY_BACKOFF_MAX": 0.05, "WATCH_TIMEOUT": 1, "RESYNC_SECONDS": 300.0, "API_URL": "http://cairn.test",
    }
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 0.5}
    cairn_client._cache.clear()
    yield
    cairn_client._cache.clear()


@pytest.fixture
def emulator():
    em = KubeEmulator(token=TOKEN)
    em.start()
    yield em
    em.stop()


@pytest.fixture
def k8s_cluster(db, emulator):
    return kubernetes_cluster_register(name="gpu-cluster", kubeconfig=yaml.safe_dump(emulator.kubeconfig()))


@pytest.fixture
def k8s_pool(k8s_cluster):
    return PoolFactory(cluster=k8s_cluster, name="gpu-pool")


@pytest.fixture
def k8s_project(db):
    return ProjectFactory(slug="vision")


@pytest.fixture
def make_workload(k8s_pool, k8s_project):
    def make(**fields):
        fields.setdefault("status", "admitted")
        return WorkloadFactory(project=k8s_project, pool=k8s_pool, **fields)

    return make


class Kubelet:
    """Plays the job controller, the StatefulSet / Deployment controllers and the kubelet,
    through the real client over HTTP (pods created, their status patched)."""

    def __init__(self, emulator: KubeEmulator):
        self.emulator = emulator
        configuration = k8s.Configuration()
        k8s_config.load_kube_config_from_dict(emulator.kubeconfig(), client_configuration=configuration,
                                              persist_config=False)
        self.core = k8s.CoreV1Api(k8s.ApiClient(configuration))
        self.batch = k8s.BatchV1Api(k8s.ApiClient(configuration))
        self.apps = k8s.AppsV1Api(k8s.ApiClient(configuration))

    def deployment_rolled_out(self, namespace: str, name: str, *, ready: int | None = None) -> None:
        """What the Deployment controller reports once it has rolled the pod template out: every
        pod updated, `ready` of them ready (default: all), the latest generation observed."""
        obj = self.emulator.get("deployments", namespace, name)
        assert obj is not None, f"no Deployment {namespace}/{name}"
        replicas = obj["spec"]["replicas"]
        self.apps.patch_namespaced_deployment_status(name, namespace, {"status": {
            "observedGeneration": obj["metadata"]["generation"], "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas if ready is None else ready,
            "availableReplicas": replicas if ready is None else ready}})

    def start_job_pods(self, namespace: str, job_name: str) -> list[str]:
        job = self.emulator.get("jobs", namespace, job_name)
        assert job is not None, f"no Job {namespace}/{job_name}"
        names = []
        template = job["spec"]["template"]
        for index in range(job["spec"]["completions"]):
            name = f"{job_name}-{index}-x{index}"
            meta = {
                "name": name, "namespace": namespace,
                "labels": {**template["metadata"]["labels"], m.COMPLETION_INDEX_ANNOTATION: str(index)},
                "annotations": {m.COMPLETION_INDEX_ANNOTATION: str(index)},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                                     "uid": job["metadata"]["uid"], "controller": True}],
            }
            self.core.create_namespaced_pod(namespace, {"metadata": meta, "spec": template["spec"]})
            names.append(name)
        return names

    def start_set_pods(self, namespace: str, kind: str, name: str) -> list[str]:
        plural = {"StatefulSet": "statefulsets", "Deployment": "deployments"}[kind]
        obj = self.emulator.get(plural, namespace, name)
        names = []
        for index in range(obj["spec"]["replicas"]):
            pod = f"{name}-{index}"
            meta = {"name": pod, "namespace": namespace, "labels": obj["spec"]["template"]["metadata"]["labels"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": name,
                                         "uid": obj["metadata"]["uid"], "controller": True}]}
            self.core.create_namespaced_pod(namespace, {"metadata": meta, "spec": obj["spec"]["template"]["spec"]})
            names.append(pod)
        return names

    def running(self, namespace: str, pod: str, *, ready: bool = True) -> None:
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": str(ready)}],
            "containerStatuses": [{"name": "main", "image": "img", "imageID": "", "ready": ready, "restartCount": 0,
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
        }})

    def terminated(self, namespace: str, pod: str, *, exit_code: int, reason: str = "") -> None:
        phase = "Succeeded" if exit_code == 0 else "Failed"
        reason = reason or ("Completed" if exit_code == 0 else "Error")
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {
            "phase": phase,
            "containerStatuses": [{"name": "main", "image": "img", "imageID": "", "ready": False, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                                                            "finishedAt": "2026-01-01T00:01:00Z"}}}],
        }})

    def job_deadline_exceeded(self, namespace: str, job_name: str, *, terminal: bool = True) -> None:
        """What the job controller does at activeDeadlineSeconds: FailureTarget while it terminates
        the pods, then (`terminal`) Failed, both with reason DeadlineExceeded."""
        message = "Job was active longer than specified deadline"
        conditions = [{"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "message": message}]
        if terminal:
            conditions.append({"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": message})
        self.batch.patch_namespaced_job_status(job_name, namespace, {"status": {"conditions": conditions}})

    def job_started(self, namespace: str, job_name: str, at) -> None:
        """What the job controller records when it starts the Job (with Kueue: once unsuspended)."""
        self.batch.patch_namespaced_job_status(
            job_name, namespace, {"status": {"startTime": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}})

    def waiting(self, namespace: str, pod: str, *, reason: str, message: str = "") -> None:
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "main", "image": "registry.example/typo:1", "imageID": "", "ready": False,
                                   "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}],
        }})

    def unschedulable(self, namespace: str, pod: str, message: str) -> None:
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
        }})

    def add_node(self, name: str, *, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3", labels=None,
                 ready: bool = True) -> None:
        self.core.create_node({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
                                                  "nvidia.com/gpu.memory": "81559", **(labels or {})}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "96", "memory": "1056Gi", "nvidia.com/gpu": str(gpus)},
                "allocatable": {"cpu": "95500m", "memory": "1000Gi", "nvidia.com/gpu": str(gpus)},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        })


@pytest.fixture
def kubelet(emulator):
    return Kubelet(emulator)


@pytest.fixture
def start_reconciler(k8s_cluster):
    """start() -> a ClusterReconciler whose informers have synced (stopped at teardown)."""
    from apps.backends.kubernetes.reconciler import ClusterReconciler

    started = []

    def start():
        reconciler = ClusterReconciler(k8s_cluster, watch_timeout=1)
        reconciler.start()
        started.append(reconciler)
        assert eventually(lambda: reconciler.synced), "informers never synced"
        return reconciler

    yield start
    for reconciler in started:
        reconciler.stop(timeout=0)  # daemon threads; their watches end with the emulator


@pytest.fixture
def reconciler(start_reconciler):
    return start_reconciler()


def eventually(check, *, timeout: float = 5.0, step=None):
    """Call `step` (e.g. a reconcile pass) then `check` until check() is truthy or time is up."""
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)
