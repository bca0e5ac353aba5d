"""platform/kubernetes/rbac.yaml is valid, has no wildcards, and grants exactly the verbs Cairn
uses: every dispatch / adopt / stop / force / logs / reconcile path is run against the emulated
API server, which records each (group, resource, verb) it serves; the two sets must be equal."""
from pathlib import Path

import kubernetes_validate
import yaml

from apps.backends.kubernetes.backend import KubernetesBackend, release_gated
from apps.backends.kubernetes.client import clients_for
from apps.backends.kubernetes.leader import LeaderElector
from apps.backends.kubernetes.reconciler import ClusterReconciler
from apps.backends.services import workload_dispatch
from apps.workloads.models import Workload

from .conftest import eventually


def _through_the_service_proxy(emulator, workload) -> None:
    """The notebook proxy's verbs (apps/backends/kubernetes/proxy.py): each HTTP method Jupyter's
    API uses, sent through the service proxy to a small server standing in for the pod."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    from apps.backends.kubernetes.proxy import notebook_upstream

    class Pod(BaseHTTPRequestHandler):
        def _ok(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _ok

        def log_message(self, *args):
            pass

    pod = ThreadingHTTPServer(("127.0.0.1", 0), Pod)
    threading.Thread(target=pod.serve_forever, daemon=True).start()
    try:
        emulator.service_backends[(NS, f"cairn-{workload.pk}")] = f"127.0.0.1:{pod.server_address[1]}"
        upstream = notebook_upstream(workload, "t")
        with httpx.Client(headers=dict(upstream.headers), timeout=10) as client:
            for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                assert client.request(method, upstream.base + "/nb/x/1/api/contents/a", content=b"{}").status_code == 200
    finally:
        pod.shutdown()

RBAC = Path(__file__).resolve().parents[3] / "platform" / "kubernetes" / "rbac.yaml"
NS = "cairn-vision"


def rbac_documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def roles() -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in rbac_documents() if d["kind"] in ("ClusterRole", "Role")}


def granted(*names: str) -> set[tuple[str, str, str]]:
    """What the ClusterRoles grant (cluster-wide cairn-dispatcher and, bound per project
    namespace, cairn-project). `bind` is an authorization check, never a request: left out."""
    chosen = [role for name, role in roles().items() if not names or name in names]
    return {(group, resource, verb) for role in chosen for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"] if verb != "bind"}


def test_rbac_manifests_validate_and_have_no_wildcards():
    docs = rbac_documents()
    assert {d["kind"] for d in docs} == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                         "RoleBinding"}
    # the Roles: in Cairn's own namespace only (its image pull Secrets, copied into project
    # namespaces; the reconcilers' Lease)
    assert {d["metadata"]["name"]: d["metadata"]["namespace"] for d in docs if d["kind"] == "Role"} == {
        "cairn-pull-secrets": "cairn-system", "cairn-leader-election": "cairn-system"}
    assert granted("cairn-leader-election") == {("coordination.k8s.io", "leases", v) for v in ("get", "create",
                                                                                             "update")}
    for doc in docs:
        kubernetes_validate.validate(doc, "1.37.0", strict=True)
    assert not any("*" in part for grant in granted() for part in grant)
    assert not {verb for _, _, verb in granted()} & {"escalate", "impersonate", "deletecollection"}
    assert not any(resource.startswith(("pods/exec", "roles", "clusterroles")) for _, resource, _ in granted())
    # bind: only of cairn-project (Cairn's RoleBinding in each project namespace), by name
    binds = [rule for role in roles().values() for rule in role["rules"] if "bind" in rule["verbs"]]
    assert binds == [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
                      "resourceNames": ["cairn-project"]}]


def test_secrets_are_granted_per_project_namespace_only():
    """The cluster-wide role (bound by the ClusterRoleBinding) grants nothing on Secrets: they come
    from cairn-project, which Cairn binds in the namespaces it creates."""
    [binding] = [d for d in rbac_documents() if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "cairn-dispatcher"
    assert not any(resource == "secrets" for _, resource, _ in granted("cairn-dispatcher"))
    assert granted("cairn-pull-secrets") == {("", "secrets", "get")}  # in cairn-system only (a Role)
    assert {r for _, r, _ in granted("cairn-project")} == {"secrets"}


def test_rbac_grants_exactly_what_the_backend_and_reconciler_use(emulator, make_workload, k8s_cluster, kubelet,
                                                                 monkeypatch):
    """Emulator only: it reads the emulator's request log (test_real_rbac.py checks the real server's audit log)."""
    # every object kind Cairn may create; an image pull Secret copied from Cairn's namespace
    k8s_cluster.config = {"volcano": True, "deployment_hpa": True, "image_pull_secrets": ["regcred"]}
    emulator.create("namespaces", {"metadata": {"name": "cairn-system"}})
    emulator.create("secrets", {"metadata": {"name": "regcred", "namespace": "cairn-system"},
                                "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}},
                    "cairn-system")
    # Training mounts an NFS dataset (its PersistentVolume and claim), as resolved by apps.storage.
    nfs = {"name": "shared", "version": 1, "mount": "/mnt/shared", "digest": "e" * 64, "source": "nfs",
           "location": {"server": "nfs.lab", "path": "/export/shared"}}
    monkeypatch.setattr("apps.backends.kubernetes.backend.datasets_of",
                        lambda workload: (nfs,) if workload.kind == "training" else ())
    k8s_cluster.save(update_fields=["config"])
    backend = KubernetesBackend()
    kubelet.add_node("gpu-a")
    kubelet.add_node("gpu-b")
    workloads = [
        # placed replica by replica (two nodes): its pods are released from their scheduling gate (pods patch)
        make_workload(kind="training", replicas=2, placement=[{"replica": i, "node": node, "gpus": [0]}
                                                              for i, node in enumerate(("gpu-a", "gpu-b"))]),
        make_workload(kind="notebook", spec={"env": {}}),
        make_workload(kind="deployment", spec={"command": ["serve"], "port": 8000, "env": {}}),
    ]
    for workload in workloads:
        workload_dispatch(workload_id=workload.pk)
        workload = Workload.objects.select_related("pool__cluster", "project").get(pk=workload.pk)
        if workload.kind == "training":
            pods = kubelet.start_job_pods(NS, workload.runtime["job"])
            released = release_gated(clients_for(k8s_cluster), [emulator.get("pods", NS, p) for p in pods])
            assert sorted(released) == sorted(pods)
        else:
            kind = "StatefulSet" if workload.kind == "notebook" else "Deployment"
            pods = kubelet.start_set_pods(NS, kind, f"cairn-{workload.pk}")
        for pod in pods:
            kubelet.running(NS, pod)
        backend.launch(workload, attempt=workload.attempt)  # a redelivery: 409 everywhere, read back
        backend.logs(workload, replica=0, attempt=workload.attempt)
        if workload.kind == "notebook":
            _through_the_service_proxy(emulator, workload)
        backend.signal(workload)
        backend.signal(workload, force=True)
    # A canary's Deployment and Service are created, then deleted (rolled back).
    from apps.deployments.services import deployment_revision_create, deployment_rollout_rollback
    from tests.factories import QuotaFactory

    QuotaFactory(project=workloads[2].project, pool=workloads[2].pool)
    served = make_workload(kind="deployment", replicas=2, spec={"command": ["serve"], "port": 8000, "env": {}})
    workload_dispatch(workload_id=served.pk)
    deployment_revision_create(workload=Workload.objects.get(pk=served.pk), changes={"env": {"V": "2"}},
                               strategy="canary")
    for _ in range(2):
        served = Workload.objects.select_related("pool__cluster", "project").get(pk=served.pk)
        backend.sync_deployment(served, emulator.get("deployments", NS, f"cairn-{served.pk}"),
                                emulator.get("deployments", NS, f"cairn-{served.pk}-canary"))
        if emulator.get("deployments", NS, f"cairn-{served.pk}-canary") is not None:
            deployment_rollout_rollback(workload=served)
    assert emulator.get("deployments", NS, f"cairn-{served.pk}-canary") is None
    # Finished workloads are cleaned up (their Secrets, then everything after the retention).
    from django.conf import settings
    from django.utils import timezone

    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, "RETENTION_SECONDS": 0}
    for workload in workloads:
        Workload.objects.filter(pk=workload.pk).update(status="failed", finished_at=timezone.now(),
                                                       runtime={"alive": False})
    # The cluster check's storage preflight.
    from apps.clusters.services import kubernetes_cluster_check

    kubernetes_cluster_check(cluster=k8s_cluster)
    reconciler = ClusterReconciler(k8s_cluster, watch_timeout=1)
    reconciler.start()
    try:
        assert eventually(lambda: reconciler.synced)
        assert reconciler.clean_finished() == 3
        watches = {("batch", "jobs", "watch"), ("", "pods", "watch"), ("apps", "statefulsets", "watch"),
                   ("apps", "deployments", "watch"), ("", "nodes", "watch"), ("", "events", "watch")}
        assert eventually(lambda: watches <= emulator.verbs)
        # Leader election: the Lease created, renewed, released.
        elector = LeaderElector(reconciler.clients, identity="me", cluster_name=k8s_cluster.name)
        assert elector.try_acquire_or_renew() and elector.try_acquire_or_renew()
        elector.release()
        copied = emulator.get("secrets", NS, "regcred")
        assert copied["type"] == "kubernetes.io/dockerconfigjson" and copied["data"] == {".dockerconfigjson": "e30="}
    finally:
        reconciler.stop(timeout=0)
    # Pods are created by the test's kubelet, nodes by the test itself: not Cairn's verbs.
    # SelfSubjectReview (who am I) and SelfSubjectAccessReview (may I) are granted to every
    # authenticated user by the cluster's own system:basic-user role: not in Cairn's.
    used = {v for v in emulator.verbs if v not in {("", "pods", "create"), ("", "nodes", "create"),
                                                   ("", "pods/status", "patch"),
                                                   ("authentication.k8s.io", "selfsubjectreviews", "create"),
                                                   ("authorization.k8s.io", "selfsubjectaccessreviews", "create")}}
    assert used - granted() == set(), "Cairn uses verbs the RBAC does not grant"
    # Kueue's Workloads are read only on clusters running Kueue (test_real_kueue.py, real API server)
    assert granted() - used == {("kueue.x-k8s.io", "workloads", "list")}, "the RBAC grants verbs Cairn never uses"
