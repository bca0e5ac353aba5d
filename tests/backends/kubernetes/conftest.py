"""Fixtures for the Kubernetes backend: an emulated API server per test (real HTTP), a cluster
registered with its kubeconfig (so credentials go through encryption and the real client), and
a `kubelet` that plays the job controller and the kubelet through the API."""
import os
import threading
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
        "HEALTH_CHECK_SECONDS": 0.0,  # each pass looks at a training job's health (the tests step passes)
    }
    settings.CAIRN = {**settings.CAIRN, "STOP_GRACE_SECONDS": 0.5}
    cairn_client._cache.clear()
    yield
    cairn_client._cache.clear()


def pytest_configure(config):
    config.addinivalue_line("markers", "real_kube: the test runs twice, against the emulator and against the real "
                                       "control plane (the emulator and kubelet fixtures become adapters of it)")


def pytest_generate_tests(metafunc):
    # CAIRN_KUBE_TRY_REAL=1: every emulator test also on the real control plane (to find portable ones)
    try_all = os.environ.get("CAIRN_KUBE_TRY_REAL") == "1"
    if "kube_backend" in metafunc.fixturenames and (try_all or metafunc.definition.get_closest_marker("real_kube")):
        metafunc.parametrize("kube_backend", ["emulator", "real"])


@pytest.fixture
def kube_backend():
    """"emulator", or "real" for tests marked real_kube (see pytest_generate_tests)."""
    return "emulator"


@pytest.fixture
def emulator(request, kube_backend):
    if kube_backend == "real":
        api = RealApi(request.getfixturevalue("real_kube"), request.getfixturevalue("settings"))
        yield api
        api.cleanup()
        return
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
                "annotations": {**(template["metadata"].get("annotations") or {}),
                                m.COMPLETION_INDEX_ANNOTATION: str(index)},
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
    if isinstance(emulator, RealApi):
        return RealKubelet(emulator)
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


# Waits of tests written for the emulator, stretched on the real control plane (controllers,
# scheduler and kwok act asynchronously; the machine is shared).
_timeout_scale = [1.0]


def eventually(check, *, timeout: float = 5.0, step=None):
    """Call `step` (e.g. a reconcile pass) then `check` until check() is truthy or time is up."""
    deadline = time.monotonic() + timeout * _timeout_scale[0]
    while True:
        if step is not None:
            step()
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


# --- the real control plane (tests/backends/kubernetes/controlplane.py) ---------------------------
#
# One control plane per pytest process, i.e. per xdist worker, started on first use. Not shared
# across workers: each worker has its own test database whose primary keys collide with the other
# worker's, and Cairn names its objects after them (cairn-<workload>-<attempt>), so two workers
# on one API server would adopt each other's Jobs. Per worker costs ~0.5 GiB and ~10 s of
# startup, and teardown needs no cross-process reference counting.

REAL_TIMEOUTS = {"CONNECT_TIMEOUT": 5.0, "REQUEST_TIMEOUT": 20.0, "RETRIES": 3, "RETRY_BACKOFF": 0.2,
                 "RETRY_BACKOFF_MAX": 1.0, "WATCH_TIMEOUT": 5}
CAIRN_USER = "system:serviceaccount:cairn-system:cairn"

# Fake nodes kwok keeps Ready: NVIDIA, AMD and Ascend accelerators (docs/accelerators.md) and one
# CPU-only node. Accelerator nodes carry their vendor's NoSchedule taint, as device-plugin
# installs usually set, so Cairn's tolerations are exercised.
REAL_NODES = [
    {"name": "h100-0", "resource": "nvidia.com/gpu", "count": 8,
     "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}},
    {"name": "h100-1", "resource": "nvidia.com/gpu", "count": 8,
     "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}},
    {"name": "mi300-0", "resource": "amd.com/gpu", "count": 8,
     "labels": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "amd.com/gpu.vram": "192G"}},
    {"name": "ascend-0", "resource": "huawei.com/Ascend910", "count": 8,
     "labels": {"node.kubernetes.io/npu.chip.name": "910B3"}},
    {"name": "cpu-0", "resource": None, "count": 0, "labels": {}},
]


def _node_object(spec: dict) -> dict:
    from .controlplane import KWOK_NODE_ANNOTATION

    name, resource = spec["name"], spec["resource"]
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    if resource:
        resources[resource] = str(spec["count"])
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "type": "kwok", **spec["labels"]}},
        "spec": {"taints": [{"key": resource, "value": "present", "effect": "NoSchedule"}] if resource else []},
        # a Node's status may be set on create; kwok then marks it Ready and keeps its lease
        "status": {"capacity": resources, "allocatable": resources,
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "kwok",
                                "containerRuntimeVersion": "kwok", "kernelVersion": "", "osImage": "",
                                "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""}},
    }


def _api_client(kubeconfig: dict) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config_from_dict(kubeconfig, client_configuration=configuration, persist_config=False)
    return k8s.ApiClient(configuration)


class RealKube:
    """The started control plane, an admin client, and the kubeconfig Cairn registers with: a
    token of the ServiceAccount platform/kubernetes/rbac.yaml binds (so every call Cairn makes
    goes through RBAC as it would in production)."""

    def __init__(self, plane):
        from kubernetes import utils as k8s_utils

        self.plane = plane
        self.api = _api_client(plane.admin_kubeconfig())
        self.core = k8s.CoreV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        with open(cairn_rbac_path()) as f:
            for obj in yaml.safe_load_all(f):
                k8s_utils.create_from_dict(self.api, obj)
        token = self.core.create_namespaced_service_account_token(
            "cairn", "cairn-system", {"spec": {"expirationSeconds": 86400}}).status.token
        self.cairn_kubeconfig = plane.kubeconfig("cairn", token=token)
        for spec in REAL_NODES:
            self.core.create_node(_node_object(spec))
        # A default StorageClass whose claims the provisioner thread below satisfies, as a
        # cluster with a ReadWriteMany-capable class would (Cairn's checkpoint and home claims).
        k8s.StorageV1Api(self.api).create_storage_class({
            "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "fake.cairn.test", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        # Volcano's PodGroup API only (no Volcano scheduler runs): Cairn creates a PodGroup per
        # attempt on clusters registered with "volcano": true.
        k8s.ApiextensionsV1Api(self.api).create_custom_resource_definition({
            "metadata": {"name": "podgroups.scheduling.volcano.sh"},
            "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced",
                     "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
                     "versions": [{"name": "v1beta1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}})
        established = lambda: any(  # noqa: E731
            c.type == "Established" and c.status == "True" for c in k8s.ApiextensionsV1Api(self.api)
            .read_custom_resource_definition("podgroups.scheduling.volcano.sh").status.conditions or [])
        assert eventually(established, timeout=30), "the PodGroup CRD was never established"
        self.stop_event = threading.Event()
        self.provisioner = threading.Thread(target=self._provision, daemon=True, name="fake-provisioner")
        self.provisioner.start()
        assert eventually(self.nodes_ready, timeout=60), f"kwok never readied the nodes\n{plane.tails()}"

    def _provision(self) -> None:
        """A fake external provisioner: a PersistentVolume pre-bound to each pending claim of the
        class "standard" (no storage behind it; no kubelet mounts anything)."""
        while not self.stop_event.wait(0.3):
            try:
                for claim in self.core.list_persistent_volume_claim_for_all_namespaces().items:
                    if claim.spec.storage_class_name != "standard" or claim.spec.volume_name:
                        continue
                    meta = claim.metadata
                    try:
                        self.core.create_persistent_volume({
                            "metadata": {"name": f"pvc-{meta.uid}",
                                         "annotations": {"pv.kubernetes.io/provisioned-by": "fake.cairn.test"}},
                            "spec": {"capacity": {"storage": claim.spec.resources.requests["storage"]},
                                     "accessModes": claim.spec.access_modes, "storageClassName": "standard",
                                     "persistentVolumeReclaimPolicy": "Retain",
                                     "claimRef": {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid},
                                     "csi": {"driver": "fake.cairn.test", "volumeHandle": meta.uid}}})
                    except k8s.ApiException as exc:
                        if exc.status != 409:
                            raise
            except Exception:  # noqa: BLE001 - keep provisioning; the tests see unbound claims
                time.sleep(1)

    def close(self) -> None:
        self.stop_event.set()

    def nodes_ready(self) -> bool:
        nodes = self.core.list_node().items
        return len(nodes) >= len(REAL_NODES) and all(
            any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) for n in nodes)

    def pods(self, namespace: str, selector: str = "") -> list:
        return self.core.list_namespaced_pod(namespace, label_selector=selector).items

    def exit(self, namespace: str, pod: str, code: int = 0, reason: str = "") -> None:
        """The pod's containers exit with `code` (kwok's pod-exit stage does the status)."""
        from .controlplane import EXIT_CODE_ANNOTATION, EXIT_REASON_ANNOTATION

        annotations = {EXIT_CODE_ANNOTATION: str(code)}
        if reason:
            annotations[EXIT_REASON_ANNOTATION] = reason
        self.core.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": annotations}})

    def describe(self, namespace: str) -> str:
        """What a failed wait should print: the namespace's pods, Jobs and Warning events."""
        lines = []
        try:
            for pod in self.pods(namespace):
                conditions = [(c.type, c.status, c.reason) for c in pod.status.conditions or []]
                lines.append(f"pod {pod.metadata.name} node={pod.spec.node_name} phase={pod.status.phase} {conditions}")
            for job in self.batch.list_namespaced_job(namespace).items:
                lines.append(f"job {job.metadata.name} active={job.status.active} conditions="
                             f"{[(c.type, c.reason) for c in job.status.conditions or []]}")
            for claim in self.core.list_namespaced_persistent_volume_claim(namespace).items:
                lines.append(f"claim {claim.metadata.name} {claim.status.phase} volume={claim.spec.volume_name}")
            for event in self.core.list_namespaced_event(namespace).items:
                if event.type == "Warning":
                    lines.append(f"event {event.involved_object.kind}/{event.involved_object.name} {event.reason}: "
                                 f"{event.message}")
        except k8s.ApiException as exc:
            lines.append(f"(describe failed: {exc.status} {exc.reason})")
        return "\n".join(lines) or f"(nothing in {namespace})"

    def audit(self, user: str = CAIRN_USER) -> list[dict]:
        return self.plane.audit_events(user)


def cairn_rbac_path():
    from .controlplane import ROOT

    return ROOT / "platform" / "kubernetes" / "rbac.yaml"


@pytest.fixture(scope="session")
def real_kube(tmp_path_factory):
    from .controlplane import ControlPlane, ControlPlaneError, bin_dir, missing_binaries

    missing = missing_binaries()
    if missing:  # a failure, never a skip: a skip would hide that these tests did not run
        pytest.fail(f"The test Kubernetes control plane is not built ({', '.join(missing)} missing in {bin_dir()}): "
                    "run make kube", pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp("kube"))
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        kube = RealKube(plane)
    except Exception as exc:
        plane.stop()
        pytest.fail(f"bootstrapping the test control plane failed: {exc!r}\n{plane.tails()}", pytrace=False)
    yield kube
    kube.close()
    plane.stop()


@pytest.fixture
def real_settings(settings, _fast_kubernetes_client):
    """The emulator's 1 s timeouts are too tight for a real API server on a busy 2-core machine."""
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, **REAL_TIMEOUTS}
    cairn_client._cache.clear()


@pytest.fixture
def real_cluster(db, real_kube, real_settings):
    return kubernetes_cluster_register(name="real-cluster", kubeconfig=yaml.safe_dump(real_kube.cairn_kubeconfig))


@pytest.fixture
def real_pool(real_cluster):
    return PoolFactory(cluster=real_cluster, name="gpu-pool")


_real_projects = iter(range(1, 1_000_000))


@pytest.fixture
def real_project(db, real_kube):
    """A project of its own per test, hence a namespace of its own (cairn-real-<n>): objects of
    earlier tests on this session's cluster never meet it. Its namespace is deleted afterwards."""
    project = ProjectFactory(slug=f"real-{next(_real_projects)}")
    yield project
    try:
        real_kube.core.delete_namespace(f"cairn-{project.slug}")
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def make_real_workload(real_pool, real_project):
    def make(**fields):
        fields.setdefault("status", "admitted")
        return WorkloadFactory(project=real_project, pool=real_pool, **fields)

    return make


@pytest.fixture
def start_real_reconciler(real_cluster):
    from apps.backends.kubernetes.reconciler import ClusterReconciler

    started = []

    def start():
        reconciler = ClusterReconciler(real_cluster, watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"])
        reconciler.start()
        started.append(reconciler)
        assert eventually(lambda: reconciler.synced, timeout=30), "informers never synced"
        return reconciler

    yield start
    for reconciler in started:
        reconciler.stop(timeout=0)


@pytest.fixture
def real_reconciler(start_real_reconciler):
    return start_real_reconciler()


# --- the emulator's and the test kubelet's interfaces over the real control plane ----------------

_API_PATHS = {
    "namespaces": "/api/v1", "pods": "/api/v1", "services": "/api/v1", "secrets": "/api/v1",
    "persistentvolumeclaims": "/api/v1", "events": "/api/v1", "nodes": "/api/v1", "configmaps": "/api/v1",
    "serviceaccounts": "/api/v1", "jobs": "/apis/batch/v1", "statefulsets": "/apis/apps/v1",
    "deployments": "/apis/apps/v1", "replicasets": "/apis/apps/v1",
    "horizontalpodautoscalers": "/apis/autoscaling/v2", "networkpolicies": "/apis/networking.k8s.io/v1",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1", "podgroups": "/apis/scheduling.volcano.sh/v1beta1",
    "poddisruptionbudgets": "/apis/policy/v1",
}
_CLUSTER_SCOPED = {"namespaces", "nodes"}
# What Cairn creates in a project namespace, deleted after each test that ran on the real server
# (the namespace stays: deleting it is asynchronous and the next test reuses its name).
_CLEANUP = ("jobs", "statefulsets", "deployments", "horizontalpodautoscalers", "poddisruptionbudgets", "services",
            "secrets", "persistentvolumeclaims", "podgroups", "pods")


class RealApi:
    """The KubeEmulator calls tests make (get, list, create, delete, creates, kubeconfig) answered
    by the real API server as cluster admin. A Secret also shows its data decoded as stringData, as
    the emulator keeps what was written. Faults (fail, stall, compact, stop) do not exist here:
    tests using them stay on the emulator."""

    def __init__(self, kube: RealKube, settings):
        self.kube = kube
        self.plane = kube.plane
        settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, **REAL_TIMEOUTS}
        cairn_client._cache.clear()
        self.audit_start = len(kube.audit())
        self.nodes_added: list[str] = []
        _timeout_scale[0] = 6.0

    def kubeconfig(self) -> dict:
        return self.kube.cairn_kubeconfig

    def _path(self, plural: str, namespace: str = "", name: str = "") -> str:
        base = _API_PATHS[plural]
        path = f"{base}/namespaces/{namespace}/{plural}" if namespace and plural not in _CLUSTER_SCOPED else \
            f"{base}/{plural}"
        return f"{path}/{name}" if name else path

    @staticmethod
    def _as_written(plural: str, obj: dict) -> dict:
        if plural == "secrets" and obj.get("data"):
            import base64

            obj["stringData"] = {k: base64.b64decode(v).decode(errors="replace") for k, v in obj["data"].items()}
        return obj

    def get(self, plural: str, namespace: str, name: str) -> dict | None:
        status, body = self.plane.request("GET", self._path(plural, namespace, name))
        if status == 404:
            return None
        assert status == 200, (status, body)
        return self._as_written(plural, body)

    def list(self, plural: str, namespace: str = "", label_selector: str = "", field_selector: str = "") -> list[dict]:
        """Objects being deleted are left out once their deletion ends: the emulator deletes at
        once, a real server's garbage collector and kwok a moment later (waits up to 15 s)."""
        from urllib.parse import urlencode

        query = urlencode({k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector))
                           if v})
        deadline = time.monotonic() + 15
        while True:
            status, body = self.plane.request("GET", self._path(plural, namespace) + (f"?{query}" if query else ""))
            assert status == 200, (status, body)
            items = [self._as_written(plural, o) for o in body.get("items") or []]
            if not any(o["metadata"].get("deletionTimestamp") for o in items) or time.monotonic() > deadline:
                return sorted(items, key=lambda o: o["metadata"]["name"])
            time.sleep(0.2)

    def create(self, plural: str, obj: dict, namespace: str = "") -> tuple[int, dict]:
        import json

        namespace = namespace or (obj.get("metadata") or {}).get("namespace", "")
        if plural == "namespaces" or not namespace:
            return self.plane.request("POST", self._path(plural), json.dumps(obj))
        self.plane.request("POST", self._path("namespaces"), json.dumps({"metadata": {"name": namespace}}))
        if plural in ("jobs", "statefulsets", "deployments"):  # the emulator takes partial specs; a server not
            raise NotImplementedError(f"creating a partial {plural} object needs the emulator")
        return self.plane.request("POST", self._path(plural, namespace), json.dumps(obj))

    def delete(self, plural: str, namespace: str, name: str, *, propagation: str = "Background") -> tuple[int, dict]:
        import json

        return self.plane.request("DELETE", self._path(plural, namespace, name),
                                  json.dumps({"propagationPolicy": propagation}))

    def creates(self, plural: str) -> int:
        """POSTs Cairn made for `plural` during this test (the API server's audit log)."""
        return sum(1 for e in self.kube.audit()[self.audit_start:]
                   if e.get("stage") == "ResponseComplete" and e.get("verb") == "create"
                   and (e.get("objectRef") or {}).get("resource") == plural
                   and not (e.get("objectRef") or {}).get("subresource"))

    def cleanup(self) -> None:
        _timeout_scale[0] = 1.0
        namespaces = [n.metadata.name for n in self.kube.core.list_namespace().items
                      if n.metadata.name.startswith("cairn-") and n.metadata.name != "cairn-system"]
        for namespace in namespaces:
            for plural in _CLEANUP:
                status, body = self.plane.request("GET", self._path(plural, namespace))
                for obj in body.get("items") or [] if status == 200 else []:
                    self.delete(plural, namespace, obj["metadata"]["name"])
        for name in self.nodes_added:
            self.delete("nodes", "", name)
        # the next test needs the GPUs these pods held
        gone = lambda: not any(self.kube.pods(ns) for ns in namespaces)  # noqa: E731
        eventually(gone, timeout=30)


class RealKubelet:
    """The test Kubelet's calls on the real control plane: the real controllers create the pods,
    kube-scheduler binds them, kwok runs them and ends them with the exit code a test asks for.
    What only a kubelet could report (waiting reasons, restarts, a pod that stays not ready)
    raises NotImplementedError: such tests stay on the emulator."""

    def __init__(self, api: RealApi):
        self.api = api
        self.kube = api.kube
        self.core, self.batch, self.apps = self.kube.core, self.kube.batch, self.kube.apps

    def _wait(self, what: str, check, timeout: float = 60):
        result = eventually(check, timeout=timeout / _timeout_scale[0])
        assert result, f"{what}\n{self.kube.describe(getattr(self, '_ns', ''))}"
        return result

    def _live_pods(self, namespace: str, selector: str) -> list:
        return [p for p in self.kube.pods(namespace, selector) if not p.metadata.deletion_timestamp]

    def start_job_pods(self, namespace: str, job_name: str) -> list[str]:
        self._ns = namespace
        job = self.batch.read_namespaced_job(job_name, namespace)
        selector = f"batch.kubernetes.io/job-name={job_name}"
        pods = self._wait(f"the job controller never created {job.spec.completions} pods of {job_name}",
                          lambda: (lambda ps: ps if len(ps) == job.spec.completions else None)(
                              self._live_pods(namespace, selector)))
        index = lambda p: int(p.metadata.annotations.get(m.COMPLETION_INDEX_ANNOTATION, 0))  # noqa: E731
        return [p.metadata.name for p in sorted(pods, key=index)]

    def start_set_pods(self, namespace: str, kind: str, name: str) -> list[str]:
        self._ns = namespace
        read = {"StatefulSet": self.apps.read_namespaced_stateful_set,
                "Deployment": self.apps.read_namespaced_deployment}[kind]
        obj = read(name, namespace)
        selector = ",".join(f"{k}={v}" for k, v in obj.spec.selector.match_labels.items())
        pods = self._wait(f"no {obj.spec.replicas} pods of {kind} {name}",
                          lambda: (lambda ps: ps if len(ps) == obj.spec.replicas else None)(
                              self._live_pods(namespace, selector)))
        return sorted(p.metadata.name for p in pods)

    def running(self, namespace: str, pod: str, *, ready: bool = True) -> None:
        if not ready:
            raise NotImplementedError("a running pod that stays not ready needs a kubelet (emulator only)")
        self._ns = namespace
        self._wait(f"pod {pod} never ran", lambda: self.core.read_namespaced_pod(pod, namespace).status.phase
                   == "Running")

    def terminated(self, namespace: str, pod: str, *, exit_code: int, reason: str = "") -> None:
        self._ns = namespace
        self.running(namespace, pod)
        self.kube.exit(namespace, pod, exit_code, reason)
        self._wait(f"pod {pod} never ended", lambda: self.core.read_namespaced_pod(pod, namespace).status.phase
                   in ("Succeeded", "Failed"))

    def deployment_rolled_out(self, namespace: str, name: str, *, ready: int | None = None) -> None:
        self._ns = namespace

        def rolled_out():
            obj = self.apps.read_namespaced_deployment(name, namespace)
            if ready is not None and ready != obj.spec.replicas:
                raise NotImplementedError("a partly ready rollout needs a kubelet (emulator only)")
            st = obj.status
            return ((st.observed_generation or 0) >= obj.metadata.generation
                    and (st.updated_replicas or 0) == obj.spec.replicas == (st.ready_replicas or 0)
                    and (st.replicas or 0) == obj.spec.replicas)

        self._wait(f"Deployment {name} never rolled out", rolled_out)

    def add_node(self, name: str, *, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3", labels=None,
                 ready: bool = True) -> None:
        if not ready:
            raise NotImplementedError("kwok readies every node it manages (emulator only)")
        node = _node_object({"name": name, "resource": "nvidia.com/gpu", "count": gpus, "labels": {
            "nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": "81559", **(labels or {})}})
        node["spec"] = {}  # as the emulator's: no taint
        self.core.create_node(node)
        self.api.nodes_added.append(name)
        self._wait(f"kwok never readied node {name}", lambda: any(
            c.type == "Ready" and c.status == "True" for c in self.core.read_node(name).status.conditions or []))

    def __getattr__(self, name):
        raise NotImplementedError(f"kubelet.{name} needs the emulator (no kubelet runs on the real control plane)")
