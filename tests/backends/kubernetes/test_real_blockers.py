"""Issue 45's blockers against the real control plane (controlplane.py: etcd, kube-apiserver with
RBAC and Pod Security, kube-controller-manager, kube-scheduler, kwok nodes), Cairn registered
with the token of the ServiceAccount platform/kubernetes/rbac.yaml binds. Each test fails on the
code before its fix:

- M1: a revision that drops an env var, the GPU and the command takes them out (strategic merge
  kept them);
- B1: pods the Job controller may not create under Pod Security become a condition, then fail the
  workload (it stayed RUNNING, quota held);
- B2: a drained gang is requeued without spending a restart; a lost node's single replica comes
  back on another node; a restart's next Job waits until every pod of the last is gone;
- B4: a finished workload leaves no Secret, Service or claim behind after the retention;
- B5: Secrets only in the project namespaces (SubjectAccessReview), the NetworkPolicies exist
  with their selectors, and evaluated on the stored objects they let Cairn's pods and nothing
  else reach a deployment's pod (no CNI runs here: nothing enforces them).
"""
import time

import pytest
from kubernetes import client as k8s

from apps.backends.kubernetes import manifests as m
from apps.backends.services import workload_dispatch
from apps.workloads.choices import ACTIVE
from apps.workloads.models import Workload, WorkloadEvent
from tests.factories import QuotaFactory

from .conftest import CAIRN_USER, eventually

WAIT = 60


def status_of(workload) -> Workload:
    return Workload.objects.select_related("pool__cluster", "project").get(pk=workload.pk)


def namespace_of(workload) -> str:
    return f"cairn-{workload.project.slug}"


def condition(workload, ctype) -> dict:
    return {c["type"]: c for c in status_of(workload).conditions}.get(ctype, {})


@pytest.fixture
def until(real_reconciler):
    return lambda check, timeout=WAIT: eventually(check, step=real_reconciler.reconcile_pass, timeout=timeout)


@pytest.fixture
def kube_settings(settings):
    def change(**values):
        settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, **values}
    return change


def pods_of(real_kube, workload, attempt=None):
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}" + (f",{m.LABEL_ATTEMPT}={attempt}" if attempt else "")
    return real_kube.pods(namespace_of(workload), selector)


def running(real_kube, workload, count, attempt=None):
    pods = pods_of(real_kube, workload, attempt)
    live = [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]
    return live if len(live) == count else None


def readmit_and_dispatch(workload):
    """What Cairn's scheduler does with a requeued workload once it fits again: admit it; the
    dispatch launches the next attempt (transient while the last one's pods are still there)."""
    from apps.backends.base import TransientBackendError

    Workload.objects.filter(pk=workload.pk, status="queued").update(status="admitted")
    try:
        workload_dispatch(workload_id=workload.pk)
    except TransientBackendError:
        pass
    return status_of(workload).status == "running"


# -- M1 ---------------------------------------------------------------------------------------------

def test_m1_a_revision_removes_env_gpu_and_command(real_kube, until, make_real_workload, real_project, real_pool):
    from apps.deployments.services import deployment_revision_create

    QuotaFactory(project=real_project, pool=real_pool)
    workload = make_real_workload(kind="deployment", replicas=1, gpu_milli=1000, cpu_milli=500, memory_mb=256,
                                  spec={"command": ["serve"], "port": 8000, "env": {"V": "1", "DROP": "me"}})
    workload_dispatch(workload_id=workload.pk)
    ns, name = namespace_of(workload), f"cairn-{workload.pk}"
    assert eventually(lambda: running(real_kube, workload, 1), timeout=WAIT), real_kube.describe(ns)
    assert until(lambda: (status_of(workload).runtime.get("main_rollout") or {}).get("complete"))
    deployment_revision_create(workload=status_of(workload), changes={
        "env": {"V": "2"}, "command": [], "resources": {"gpu_milli": 0}})

    def template():
        return real_kube.apps.read_namespaced_deployment(name, ns).spec.template

    assert until(lambda: template().metadata.annotations.get(m.ANNOTATION_REVISION) == "2"), real_kube.describe(ns)
    main = next(c for c in template().spec.containers if c.name == "main")
    env = {e.name: e.value for e in main.env}
    assert env["V"] == "2" and "DROP" not in env
    assert "nvidia.com/gpu" not in (main.resources.limits or {})
    assert main.command is None
    # and the Deployment controller rolled it out: the new pod has no GPU
    assert eventually(lambda: (pods := running(real_kube, workload, 1)) and "nvidia.com/gpu" not in (
        pods[0].spec.containers[0].resources.limits or {}), timeout=WAIT), real_kube.describe(ns)


# -- B1 ---------------------------------------------------------------------------------------------

def test_b1_pods_refused_by_pod_security_become_a_condition_then_fail_the_workload(
        real_kube, until, make_real_workload, kube_settings, monkeypatch):
    """The Job is admitted (Pod Security checks pods, not Jobs); its controller's pod creates are
    refused. The pod spec carries an inline hostPath volume, as the dataset volumes did before."""
    original = m.training_manifests

    def with_host_path(view, options):
        objects = original(view, options)
        pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
        pod["volumes"].append({"name": "scratch", "hostPath": {"path": "/var/tmp", "type": "Directory"}})
        return objects

    monkeypatch.setattr(m, "training_manifests", with_host_path)
    kube_settings(POD_CREATE_TIMEOUT_SECONDS=3600)
    workload = make_real_workload(replicas=2, gpu_milli=1000)
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    ns = namespace_of(workload)
    assert until(lambda: condition(workload, "PodsCreated").get("status") == "False"), (
        status_of(workload).conditions, real_kube.describe(ns))
    message = condition(workload, "PodsCreated")["message"]
    assert "violates PodSecurity" in message and "hostPath" in message
    assert status_of(workload).status == "running" and pods_of(real_kube, workload) == []
    kube_settings(POD_CREATE_TIMEOUT_SECONDS=1)
    assert until(lambda: status_of(workload).status == "failed"), real_kube.describe(ns)
    failed = status_of(workload)
    assert failed.status_reason == "FailedCreate" and failed.status not in ACTIVE  # quota released
    # its Job is deleted: the controller stops retrying
    assert until(lambda: real_kube.batch.list_namespaced_job(ns, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}")
                 .items == []), real_kube.describe(ns)


def test_b1_cairns_own_dataset_volumes_pass_pod_security(real_kube, until, make_real_workload, monkeypatch):
    """NFS exports, host paths and the node cache's folder reach the pods as claims of
    PersistentVolumes Cairn creates: the real Pod Security admission lets the Job's pods in (an
    inline nfs / hostPath volume was refused) and they run."""
    from .test_manifests import DATASETS

    monkeypatch.setattr("apps.backends.kubernetes.backend.datasets_of",
                        lambda workload: DATASETS if workload.kind == "training" else ())
    workload = make_real_workload(replicas=2, gpu_milli=1000)
    assert workload_dispatch(workload_id=workload.pk).status == "running", status_of(workload).status_message
    ns = namespace_of(workload)
    pods = eventually(lambda: running(real_kube, workload, 2), timeout=WAIT)
    assert pods, real_kube.describe(ns)
    volumes = [v for v in pods[0].spec.volumes if v.name.startswith("dataset") and v.secret is None]
    assert len(volumes) == 3 and all(v.persistent_volume_claim is not None for v in volumes)
    claims = {c.metadata.name: c for c in real_kube.core.list_namespaced_persistent_volume_claim(ns).items}
    for volume in volumes:
        claim = claims[volume.persistent_volume_claim.claim_name]
        assert claim.status.phase == "Bound" and claim.spec.volume_name.startswith("cairn-ds-")
    assert until(lambda: condition(workload, "PodsCreated") == {} and condition(
        workload, "ContainersReady").get("status") == "True"), status_of(workload).conditions


# -- B2 ---------------------------------------------------------------------------------------------

def test_b2_a_drained_gang_is_requeued_without_spending_a_restart(real_kube, until, make_real_workload):
    workload = make_real_workload(replicas=2, gpu_milli=1000, max_restarts=1)
    workload_dispatch(workload_id=workload.pk)
    ns = namespace_of(workload)
    pods = eventually(lambda: running(real_kube, workload, 2, attempt=1), timeout=WAIT)
    assert pods, real_kube.describe(ns)
    # kubectl drain: the Eviction API (the API server adds DisruptionTarget, then deletes)
    real_kube.core.create_namespaced_pod_eviction(pods[0].metadata.name, ns, k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=pods[0].metadata.name, namespace=ns)))
    assert until(lambda: status_of(workload).status == "queued"), (status_of(workload).status_message,
                                                                  real_kube.describe(ns))
    requeued = status_of(workload)
    assert requeued.status_reason == "Disrupted" and "EvictionByEvictionAPI" in requeued.status_message
    assert requeued.attempt == 1
    # admitted again: attempt 2 once attempt 1's pods are gone
    assert until(lambda: readmit_and_dispatch(workload)), real_kube.describe(ns)
    assert status_of(workload).attempt == 2
    pods = eventually(lambda: running(real_kube, workload, 2, attempt=2), timeout=WAIT)
    assert pods, real_kube.describe(ns)
    # attempt 2 fails: with max_restarts 1 it is restarted (the drain spent nothing)
    real_kube.exit(ns, pods[0].metadata.name, 1)
    assert until(lambda: status_of(workload).attempt == 3), (status_of(workload).status_message,
                                                            real_kube.describe(ns))
    assert status_of(workload).status == "running"
    assert WorkloadEvent.objects.filter(workload=workload, reason="Restarting").exists()


def test_b2_a_lost_nodes_single_replica_is_recovered_elsewhere(real_kube, until, make_real_workload, kube_settings):
    from .controlplane import KWOK_NODE_ANNOTATION

    kube_settings(NODE_LOST_GRACE_SECONDS=1)
    workload = make_real_workload(replicas=1, gpu_milli=1000)
    workload_dispatch(workload_id=workload.pk)
    ns = namespace_of(workload)
    [pod] = eventually(lambda: running(real_kube, workload, 1, attempt=1), timeout=WAIT) or [None]
    assert pod is not None, real_kube.describe(ns)
    node = pod.spec.node_name
    # the node dies: kwok stops being its kubelet, and its Ready condition goes Unknown
    real_kube.core.patch_node(node, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: "lost"}}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 120))
    try:
        real_kube.core.patch_node_status(node, {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting",
             "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}})
        assert until(lambda: status_of(workload).status == "queued"), (status_of(workload).status_message,
                                                                      real_kube.describe(ns))
        assert status_of(workload).status_reason == "Disrupted"
        # its pod never ends by itself (no kubelet): Cairn force-deletes it, then attempt 2 runs
        assert until(lambda: readmit_and_dispatch(workload), timeout=90), real_kube.describe(ns)
        [again] = eventually(lambda: running(real_kube, workload, 1, attempt=2), timeout=WAIT) or [None]
        assert again is not None, real_kube.describe(ns)
        assert again.spec.node_name != node  # kept off the lost node (unhealthy: NotIn affinity)
        real_kube.exit(ns, again.metadata.name, 0)
        assert until(lambda: status_of(workload).status == "succeeded"), real_kube.describe(ns)
    finally:
        real_kube.core.patch_node(node, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: "fake"}}})


def test_b2_the_next_attempt_starts_only_after_every_pod_of_the_last_is_gone(real_kube, until, make_real_workload):
    workload = make_real_workload(replicas=2, gpu_milli=1000, max_restarts=1)
    workload_dispatch(workload_id=workload.pk)
    ns = namespace_of(workload)
    pods = eventually(lambda: running(real_kube, workload, 2, attempt=1), timeout=WAIT)
    assert pods, real_kube.describe(ns)
    held = pods[1].metadata.name
    # rank 1 takes its time to terminate (a finalizer stands for a long graceful shutdown)
    real_kube.core.patch_namespaced_pod(held, ns, {"metadata": {"finalizers": ["cairn.test/hold"]}})
    real_kube.exit(ns, pods[0].metadata.name, 1)
    assert until(lambda: status_of(workload).attempt == 2), real_kube.describe(ns)
    second = f"cairn-{workload.pk}-2"

    def job_exists(name):
        try:
            real_kube.batch.read_namespaced_job(name, ns)
            return True
        except k8s.ApiException as exc:
            if exc.status == 404:
                return False
            raise

    assert until(lambda: real_kube.core.read_namespaced_pod(held, ns).metadata.deletion_timestamp is not None)
    end = time.monotonic() + 5
    while time.monotonic() < end:  # rank 1 of attempt 1 still terminating: no attempt 2 yet
        assert not job_exists(second), "attempt 2 started while a pod of attempt 1 was still there"
        until(lambda: False, timeout=0.5)
    real_kube.core.patch_namespaced_pod(held, ns, {"metadata": {"finalizers": None}})
    assert until(lambda: job_exists(second)), real_kube.describe(ns)
    assert pods_of(real_kube, workload, attempt=1) == []
    assert eventually(lambda: running(real_kube, workload, 2, attempt=2), timeout=WAIT), real_kube.describe(ns)


# -- B4 ---------------------------------------------------------------------------------------------

def test_b4_a_finished_workload_leaves_no_secret_service_or_claim_behind(real_kube, until, make_real_workload,
                                                                         kube_settings):
    kube_settings(RETENTION_SECONDS=0)
    workload = make_real_workload(replicas=2, gpu_milli=1000)
    workload_dispatch(workload_id=workload.pk)
    ns, selector = namespace_of(workload), f"{m.LABEL_WORKLOAD}={workload.pk}"
    assert real_kube.core.list_namespaced_secret(ns, label_selector=selector).items  # the run Secret
    pods = eventually(lambda: running(real_kube, workload, 2), timeout=WAIT)
    assert pods, real_kube.describe(ns)
    for pod in pods:
        real_kube.exit(ns, pod.metadata.name, 0)
    assert until(lambda: status_of(workload).status == "succeeded"), real_kube.describe(ns)

    def left():
        core, net = real_kube.core, k8s.NetworkingV1Api(real_kube.api)
        claims = [c for c in core.list_namespaced_persistent_volume_claim(ns, label_selector=selector).items
                  if c.metadata.deletion_timestamp is None]  # (pvc-protection may hold a deleted one a moment)
        return {"secrets": core.list_namespaced_secret(ns, label_selector=selector).items,
                "services": core.list_namespaced_service(ns, label_selector=selector).items,
                "claims": claims,
                "jobs": real_kube.batch.list_namespaced_job(ns, label_selector=selector).items,
                "policies": net.list_namespaced_network_policy(ns, label_selector=selector).items,
                "pods": core.list_namespaced_pod(ns, label_selector=selector).items}

    assert until(lambda: not any(left().values())), {k: [o.metadata.name for o in v] for k, v in left().items()}
    assert status_of(workload).runtime["cleaned"] == "all"
    # every delete went through the shipped RBAC (Secrets: the namespace's RoleBinding)
    refused = [f"{e['verb']} {e['requestURI']}" for e in real_kube.audit()
               if (e.get("responseStatus") or {}).get("code") == 403 and f"/namespaces/{ns}/" in e["requestURI"]]
    assert not refused, refused


# -- B5 ---------------------------------------------------------------------------------------------

def test_b5_secrets_only_in_project_namespaces_and_the_policies_exist(real_kube, until, make_real_workload):
    workload = make_real_workload(replicas=2, gpu_milli=1000)
    assert workload_dispatch(workload_id=workload.pk).status == "running", status_of(workload).status_message
    ns = namespace_of(workload)

    def may(verb, namespace, resource="secrets"):
        review = k8s.AuthorizationV1Api(real_kube.api).create_subject_access_review(k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(user=CAIRN_USER, groups=["system:serviceaccounts",
                                                                       "system:serviceaccounts:cairn-system",
                                                                       "system:authenticated"],
                                               resource_attributes=k8s.V1ResourceAttributes(
                                                   namespace=namespace, verb=verb, resource=resource))))
        return review.status.allowed

    assert may("create", ns) and may("get", ns)  # its own project namespace: through its RoleBinding
    for other in ("default", "kube-system"):
        assert not may("get", other) and not may("list", other), other
    # its own namespace: get only (the image pull Secrets it copies into project namespaces)
    assert may("get", "cairn-system") and not may("list", "cairn-system") and not may("create", "cairn-system")
    assert not may("list", "")  # cluster-wide: no
    binding = k8s.RbacAuthorizationV1Api(real_kube.api).read_namespaced_role_binding("cairn", ns)
    assert binding.role_ref.name == "cairn-project"
    assert [(s.kind, s.namespace, s.name) for s in binding.subjects] == [("ServiceAccount", "cairn-system", "cairn")]

    net = k8s.NetworkingV1Api(real_kube.api)
    policies = {p.metadata.name: p for p in net.list_namespaced_network_policy(ns).items}
    assert set(policies) >= {"cairn-default-deny", "cairn-egress", "cairn-from-cairn", f"cairn-{workload.pk}-ranks"}
    deny = policies["cairn-default-deny"].spec
    assert deny.pod_selector.match_labels is None and deny.policy_types == ["Ingress", "Egress"]
    assert not deny.ingress and not deny.egress
    ranks = policies[f"cairn-{workload.pk}-ranks"].spec
    assert ranks.pod_selector.match_labels == {m.LABEL_WORKLOAD: str(workload.pk)}
    assert ranks.ingress[0]._from[0].pod_selector.match_labels == {m.LABEL_WORKLOAD: str(workload.pk)}
    served = policies["cairn-from-cairn"].spec
    assert served.ingress[0]._from[0].namespace_selector.match_labels == {
        "kubernetes.io/metadata.name": "cairn-system"}
    # the pods of the workload are selected by the ranks' policy (and by the default deny)
    pods = eventually(lambda: running(real_kube, workload, 2), timeout=WAIT)
    assert pods and all(p.metadata.labels[m.LABEL_WORKLOAD] == str(workload.pk) for p in pods)
    # and nothing Cairn did in this namespace was refused by RBAC
    refused = [f"{e['verb']} {e['requestURI']}" for e in real_kube.audit()
               if (e.get("responseStatus") or {}).get("code") == 403 and f"/namespaces/{ns}/" in e["requestURI"]]
    assert not refused, refused


def _selects(selector: dict | None, labels: dict) -> bool:
    """A LabelSelector (as the API returns it, dict) against labels; {} selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression["key"], expression["operator"], expression.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) or (
                op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def ingress_allowed(policies: list[dict], *, pod: dict, source_namespace: dict, source_pod: dict) -> bool:
    """NetworkPolicy semantics for ingress (what an enforcing CNI does, for the rules Cairn
    writes: peers by namespace and pod selectors): a pod selected by some Ingress policy accepts
    only what one of their rules lets in."""
    selecting = [p for p in policies if "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])
                 and _selects(p["spec"].get("podSelector"), pod["metadata"]["labels"])]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            for peer in rule.get("from") or []:
                namespace_ok = ("namespaceSelector" not in peer and source_namespace["metadata"]["name"] ==
                                pod["metadata"]["namespace"]) or ("namespaceSelector" in peer and _selects(
                                    peer["namespaceSelector"], source_namespace["metadata"]["labels"]))
                if namespace_ok and _selects(peer.get("podSelector"), source_pod["metadata"]["labels"]):
                    return True
    return False


def test_b5_another_namespaces_pod_cannot_reach_a_deployment_but_cairn_can(real_kube, until, make_real_workload):
    """No CNI runs here, so nothing enforces the policies: their semantics are evaluated on the
    objects the API server stored (ingress_allowed), for the deployment's real pod."""
    workload = make_real_workload(kind="deployment", replicas=1, spec={"command": ["serve"], "port": 8000, "env": {}})
    assert workload_dispatch(workload_id=workload.pk).status == "running"
    ns = namespace_of(workload)
    [pod] = eventually(lambda: running(real_kube, workload, 1), timeout=WAIT) or [None]
    assert pod is not None, real_kube.describe(ns)
    api = real_kube.api
    policies = [api.sanitize_for_serialization(p) for p in k8s.NetworkingV1Api(api).list_namespaced_network_policy(
        ns).items]
    target = api.sanitize_for_serialization(pod)

    def namespace(name):
        return api.sanitize_for_serialization(real_kube.core.read_namespace(name))

    stranger = {"metadata": {"labels": {"app": "curl"}}}
    gateway = {"metadata": {"labels": {"app.kubernetes.io/name": "cairn", "app.kubernetes.io/component": "web"}}}
    assert not ingress_allowed(policies, pod=target, source_namespace=namespace("default"), source_pod=stranger)
    assert not ingress_allowed(policies, pod=target, source_namespace=namespace("default"), source_pod=gateway)
    assert not ingress_allowed(policies, pod=target, source_namespace=namespace(ns), source_pod=stranger)
    assert ingress_allowed(policies, pod=target, source_namespace=namespace("cairn-system"), source_pod=gateway)
