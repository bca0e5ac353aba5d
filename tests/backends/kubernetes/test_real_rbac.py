"""The shipped RBAC (platform/kubernetes/rbac.yaml) suffices for Cairn: a lifecycle of each kind
of workload against the real API server with Cairn registered by that ServiceAccount's token, then
the API server's audit log of that identity (tests/backends/kubernetes/controlplane.py) holds no
403: no call Cairn made, informers' lists and watches included, was refused."""
from collections import Counter

from apps.backends.kubernetes import manifests as m
from apps.backends.kubernetes.backend import KubernetesBackend
from apps.backends.kubernetes.client import TransientError
from apps.backends.services import workload_dispatch, workload_stop_signal
from apps.workloads.models import Workload
from apps.workloads.services import workload_stop

from .conftest import CAIRN_USER, eventually


def status_of(workload) -> Workload:
    return Workload.objects.get(pk=workload.pk)


def test_every_call_of_a_full_lifecycle_is_authorized(real_kube, start_real_reconciler, make_real_workload):
    before = len(real_kube.audit())
    reconciler = start_real_reconciler()  # its informers' lists and watches count too
    until = lambda check: eventually(check, step=reconciler.reconcile_pass, timeout=60)  # noqa: E731
    training = make_real_workload(replicas=2, gpu_milli=1000)
    notebook = make_real_workload(kind="notebook", spec={"env": {}})
    deployment = make_real_workload(kind="deployment", replicas=1,
                                    spec={"command": ["serve"], "port": 9000, "env": {}})
    for workload in (training, notebook, deployment):
        assert workload_dispatch(workload_id=workload.pk).status == "running", status_of(workload).status_message
    ns = f"cairn-{training.project.slug}"

    def all_running():
        pods = real_kube.pods(ns)
        return len([p for p in pods if p.status.phase == "Running"]) == 4

    assert eventually(all_running, timeout=90), real_kube.describe(ns)
    assert until(lambda: all(
        {c["type"]: c for c in status_of(w).conditions}.get("ContainersReady", {}).get("status") == "True"
        for w in (training, notebook, deployment)))
    # a log read: refused by the absent kubelet, not by RBAC (the audit checks which)
    try:
        KubernetesBackend().logs(status_of(training), replica=0, attempt=1)
    except TransientError:
        pass

    for pod in real_kube.pods(ns, f"{m.LABEL_WORKLOAD}={training.pk}"):
        real_kube.exit(ns, pod.metadata.name, 0)
    assert until(lambda: status_of(training).status == "succeeded"), real_kube.describe(ns)
    for workload in (notebook, deployment):
        workload_stop(workload=status_of(workload))
        workload_stop_signal(workload_id=workload.pk)
    assert until(lambda: status_of(notebook).status == "stopped" and status_of(deployment).status == "stopped"), (
        status_of(notebook).status_message, status_of(deployment).status_message, real_kube.describe(ns))

    events = real_kube.audit()[before:]
    assert events, f"no audited request of {CAIRN_USER}"
    refused = [f"{e['verb']} {e['requestURI']}: {e['responseStatus'].get('message', '')}"
               for e in events if (e.get("responseStatus") or {}).get("code") == 403]
    assert not refused, "\n".join(refused)
    calls = Counter((e["verb"], (e.get("objectRef") or {}).get("resource"),
                     (e.get("objectRef") or {}).get("subresource")) for e in events)
    for expected in (("create", "namespaces", None), ("create", "jobs", None), ("create", "statefulsets", None),
                     ("create", "deployments", None), ("watch", "pods", None), ("list", "nodes", None),
                     ("get", "pods", "log")):
        assert calls[expected], f"Cairn never made the call {expected}; made: {sorted(calls)}"
