"""The reconciler at a smaller size than issue 42's target (bench/kube_scale.py measures 1,000
nodes; docs/benchmarks.md): NODES kwok GPU nodes and WORKLOADS two-replica training jobs whose
pods are Cairn's real pod template, on a control plane of this module's own (its thousands of
pods would slow every other test's lists on the shared one).

What is asserted, from the API server's audit log of Cairn's identity and the reconciler's own
counts: its lists are paginated (`limit`, then `continue`); what it caches is slimmed (no
managedFields, no node heartbeats); after the first full pass, one pod's change is one look at
one workload, a handful of SQL queries and no API call (two when it restarts the job: the pods
listed and the failed Job deleted, after the database committed); between full passes the scan
of the rows reads the few written lately, and a full pass's queries do not grow with the workloads
or the nodes; a changed Node is the only node synced; the nodes' status heartbeats wake nothing."""
import math
import time

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.backends.kubernetes import client as cairn_client
from apps.backends.kubernetes import manifests as m
from apps.backends.kubernetes import reconciler as reconciler_module
from apps.backends.kubernetes.reconciler import ClusterReconciler
from apps.clusters.models import Node
from apps.clusters.services import kubernetes_cluster_register
from apps.workloads.models import Workload
from tests.factories import PoolFactory, ProjectFactory

from .conftest import REAL_NODES, REAL_TIMEOUTS, RealKube, eventually
from .fleet import (
    admin_api,
    create_nodes,
    create_pods,
    ensure_namespace,
    training_objects,
    training_view,
    wait_ready,
    workload_rows,
)

NODES, WORKLOADS, REPLICAS, PAGE = 100, 500, 2, 100
SCAN_SLACK = 2.0  # the DB scan's slack (reconciler.SCAN_SLACK_SECONDS), short for the test


@pytest.fixture(scope="module")
def scale_kube(tmp_path_factory):
    from .controlplane import ControlPlane, ControlPlaneError, missing_binaries

    if missing_binaries():
        pytest.fail("The test Kubernetes control plane is not built: run make kube", pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp("scale-kube"))
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        kube = RealKube(plane)  # Cairn's RBAC and token, the usual five nodes
        api = admin_api(plane.admin_kubeconfig())
        nodes = create_nodes(api, NODES)
        # Ready and settled (the node lifecycle controller's taint and labels), the usual five too:
        # its late updates are real changes the reconciler would sync (and the test count)
        wait_ready(api, [*nodes, *(n["name"] for n in REAL_NODES)])
        yield kube, api, nodes
        kube.close()
    finally:
        for proc in plane.procs.values():  # a throwaway cluster: no graceful shutdown
            proc.kill()
        plane.stop()


def cairn_calls(kube, since: int) -> list[dict]:
    """Cairn's requests since audit entry `since`, watches left out (informers renew theirs)."""
    return [e for e in kube.audit()[since:] if e.get("stage") == "ResponseComplete" and e.get("verb") != "watch"]


def step_after(reconciler, check, *, timeout: float = 30) -> None:
    """Wait until the informers show `check` (the change reached the cache), then nothing else."""
    assert eventually(check, timeout=timeout), "the change never reached the reconciler's cache"


def test_paginated_lists_slim_caches_and_one_look_per_change(scale_kube, db, settings, monkeypatch):
    kube, api, nodes = scale_kube
    monkeypatch.setattr(reconciler_module, "SCAN_SLACK_SECONDS", SCAN_SLACK)
    settings.CAIRN_KUBERNETES = {**settings.CAIRN_KUBERNETES, **REAL_TIMEOUTS, "PAGE_SIZE": PAGE,
                                 "HEALTH_CHECK_SECONDS": 3600.0}
    cairn_client._cache.clear()
    cluster = kubernetes_cluster_register(name="scale", kubeconfig=yaml.safe_dump(kube.cairn_kubeconfig))
    pool = PoolFactory(cluster=cluster, name="gpu-pool")
    project = ProjectFactory(slug="scale")
    namespace = "cairn-scale"
    ensure_namespace(api, namespace)
    placements = [[nodes[(REPLICAS * i + r) % NODES] for r in range(REPLICAS)] for i in range(WORKLOADS)]
    rows = workload_rows(project=project, pool=pool, placements=placements)
    options = m.ClusterOptions()
    pods = [pod for row, where in zip(rows, placements, strict=True)
            for pod in training_objects(training_view(row.pk, project.slug, replicas=REPLICAS), options, where)[1]]
    assert create_pods(api, pods, threads=24) == WORKLOADS * REPLICAS

    since = len(kube.audit())
    reconciler = ClusterReconciler(cluster, watch_timeout=REAL_TIMEOUTS["WATCH_TIMEOUT"])
    reconciler.start()
    try:
        assert eventually(lambda: reconciler.synced, timeout=60), "informers never synced"
        informer = reconciler.informers["pods"]
        assert len(informer) == len(pods)
        # Paginated: PAGE pods a request, each page after the first asked by its continue token.
        lists = [e for e in cairn_calls(kube, since) if e["verb"] == "list"
                 and (e.get("objectRef") or {}).get("resource") == "pods" and "managed-by%3Dcairn" in e["requestURI"]
                 and "%21%3D" not in e["requestURI"]]
        assert len(lists) == math.ceil(len(pods) / PAGE), [e["requestURI"] for e in lists]
        assert all(f"limit={PAGE}" in e["requestURI"] for e in lists)
        assert sum("continue=" in e["requestURI"] for e in lists) == len(lists) - 1
        # Slimmed on ingest.
        cached = informer.get(namespace, pods[0]["metadata"]["name"])
        assert "managedFields" not in cached["metadata"] and cached["status"]["phase"] == "Running"
        assert set(cached["spec"]) <= {"nodeName", "containers", "initContainers", "schedulingGates", "nodeSelector",
                                       "priorityClassName", "overhead"}
        node = reconciler.informers["nodes"].get("", nodes[0])
        assert all("lastHeartbeatTime" not in c for c in node["status"]["conditions"])

        # The first pass is a full one: every workload and every node.
        started = time.monotonic()
        reconciler.step()
        full = time.monotonic() - started
        assert reconciler.stats["full_passes"] == 1 and reconciler.stats["workloads"] == WORKLOADS
        assert Node.objects.filter(cluster=cluster).count() == NODES + len(REAL_NODES)
        assert all(status == "running" for status in Workload.objects.values_list("status", flat=True))
        # kwok runs the pods meanwhile: what it changes is looked at, until it is done
        nodes_synced, heartbeats = reconciler.stats["nodes_synced"], reconciler.informers["nodes"].unchanged
        assert eventually(lambda: sum(p["status"].get("phase") == "Running" for p in informer.items()) == len(pods),
                          step=reconciler.step, timeout=120), "kwok never ran every pod"
        reconciler.step()
        looked = reconciler.stats["workloads"]
        reconciler.step()
        assert reconciler.stats["workloads"] == looked, "an idle pass looked at workloads"
        # (the rows the passes above wrote: older than the scan's slack once the full pass below ran)
        time.sleep(SCAN_SLACK + 0.5)
        # A steady full pass reads in bulk: its queries do not grow with the workloads (500) or
        # the nodes (105): rows 200 a query, pools and projects once, nodes seen again in one UPDATE.
        with CaptureQueriesContext(connection) as queries:
            reconciler.reconcile_pass()
        assert len(queries) < 30, [q["sql"][:120] for q in queries]
        nodes_synced = reconciler.stats["nodes_synced"]  # (a full pass syncs every node)

        # One pod ends: one look at one workload, a few queries, no API call.
        first, second = rows[0], rows[1]
        pod_of = {(p["metadata"]["labels"][m.LABEL_WORKLOAD], p["metadata"]["labels"][m.COMPLETION_INDEX_ANNOTATION]):
                  p["metadata"]["name"] for p in pods}
        kube.exit(namespace, pod_of[(str(first.pk), "0")], 0)
        step_after(reconciler, lambda: (informer.get(namespace, pod_of[(str(first.pk), "0")]) or {}).get(
            "status", {}).get("phase") == "Succeeded")
        mark, looked = len(kube.audit()), reconciler.stats["workloads"]
        reconciler.scanned_at = float("-inf")  # the DB scan of rows is due with this pass
        scanned = reconciler.stats["rows_scanned"]
        with CaptureQueriesContext(connection) as queries:
            started = time.monotonic()
            reconciler.step()
            one = time.monotonic() - started
        assert reconciler.stats["workloads"] - looked == 1
        assert len(queries) <= 12, [q["sql"][:120] for q in queries]
        # Between full passes the scan reads the rows written lately, not every running workload's.
        assert reconciler.stats["rows_scanned"] - scanned < 20, reconciler.stats["rows_scanned"] - scanned
        assert cairn_calls(kube, mark) == []
        assert Workload.objects.get(pk=first.pk).status == "running"  # one of two replicas done
        kube.exit(namespace, pod_of[(str(first.pk), "1")], 0)
        step_after(reconciler, lambda: (informer.get(namespace, pod_of[(str(first.pk), "1")]) or {}).get(
            "status", {}).get("phase") == "Succeeded")
        mark, looked = len(kube.audit()), reconciler.stats["workloads"]
        reconciler.step()
        assert Workload.objects.get(pk=first.pk).status == "succeeded"
        assert reconciler.stats["workloads"] - looked == 1 and cairn_calls(kube, mark) == []

        # A replica fails with a restart left: the failed attempt's Job deleted (after the commit),
        # its pods listed first: two API calls.
        Workload.objects.filter(pk=second.pk).update(max_restarts=1)
        kube.exit(namespace, pod_of[(str(second.pk), "0")], 3)
        step_after(reconciler, lambda: (informer.get(namespace, pod_of[(str(second.pk), "0")]) or {}).get(
            "status", {}).get("phase") == "Failed")
        mark, looked = len(kube.audit()), reconciler.stats["workloads"]
        reconciler.step()
        restarted = Workload.objects.get(pk=second.pk)
        assert restarted.attempt == 2 and restarted.status == "running", restarted.status_message
        assert reconciler.stats["workloads"] - looked == 1
        calls = sorted((e["verb"], e["objectRef"]["resource"]) for e in cairn_calls(kube, mark))
        assert calls == [("delete", "jobs"), ("list", "pods")], calls

        # A Node changed: that node alone is synced. Heartbeats (kwok's, every 10 s) change nothing read.
        assert reconciler.stats["nodes_synced"] == nodes_synced, "heartbeats synced nodes"
        kube.core.patch_node(nodes[7], {"metadata": {"labels": {"cairn.test/touched": "yes"}}})
        step_after(reconciler, lambda: "cairn.test/touched" in reconciler.informers["nodes"].get(
            "", nodes[7])["metadata"].get("labels", {}))
        synced = reconciler.stats["nodes_synced"]
        reconciler.step()
        assert reconciler.stats["nodes_synced"] - synced == 1
        assert Node.objects.get(cluster=cluster, name=nodes[7]).labels["cairn.test/touched"] == "yes"
        # (the test has run for more than kwok's heartbeat period: every node beat at least once)
        assert eventually(lambda: reconciler.informers["nodes"].unchanged >= heartbeats + NODES, timeout=30)
        synced = reconciler.stats["nodes_synced"]
        reconciler.step()
        assert reconciler.stats["nodes_synced"] == synced, "heartbeats synced nodes"
        print(f"\nscale test: {len(pods)} pods, {NODES} nodes: full pass {full:.2f}s, one event {one * 1000:.0f}ms")
    finally:
        reconciler.stop(timeout=0)
