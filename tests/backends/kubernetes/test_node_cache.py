"""Kubernetes nodes report their dataset cache: the fill-datasets init container (the real
cachefill.py, run here on the job file of the Secret Cairn created in the emulated API server,
against moto's S3 server) writes its report to its termination message; the kubelet (played by
the test) puts it in the pod's status; the reconciler records it for the pod's node, so
data-aware placement prefers that node for the next workload needing the version."""
import json
import subprocess
import sys

import pytest

from apps.backends.services import workload_dispatch
from apps.storage import cachefill
from apps.storage.models import NodeCacheEntry
from apps.storage.selectors import dataset_cache_view
from apps.storage.services import dataset_register, storage_spec_check
from tests.s3emu import CREDENTIALS, s3_location, s3_server  # noqa: F401 - the S3 emulator fixture

from .conftest import eventually

NS = "cairn-vision"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def imgs(s3_server, k8s_project):  # noqa: F811
    s3_server.make_bucket("corpus")
    for i in range(3):
        s3_server.put("corpus", f"images/{i}.bin", bytes([i]) * 1000)
    return dataset_register(project=k8s_project, name="imgs", source="s3",
                            location=s3_location(s3_server, "corpus", "images"), credentials=CREDENTIALS)


def _workload(make_workload, k8s_project, k8s_pool):
    spec = storage_spec_check(project=k8s_project, pool=k8s_pool,
                              spec={"command": ["python", "train.py"], "env": {}, "datasets": [{"name": "imgs"}]})
    workload = make_workload(spec=spec)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    return workload


def _fill_as_the_init_container(emulator, workload, cache, tmp_path) -> str:
    """Run cachefill.py on the Secret's job file as the init container would; its report."""
    secret = emulator.get("secrets", NS, f"cairn-{workload.pk}-{workload.attempt}-datasets")
    job = json.loads(secret["stringData"]["job.json"])
    assert job["report_path"] == "/dev/termination-log"
    job.update(cache_root=str(cache), report_path=str(tmp_path / f"termination-log-{workload.pk}"))
    path = tmp_path / f"job-{workload.pk}.json"
    path.write_text(json.dumps(job))
    done = subprocess.run([sys.executable, cachefill.__file__, str(path), "--"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return (tmp_path / f"termination-log-{workload.pk}").read_text()


def _init_done(kubelet, pod: str, node: str, message: str, finished: str) -> None:
    """What the scheduler and the kubelet write: the node the pod is bound to, and the init
    container's end with its termination message."""
    kubelet.core.patch_namespaced_pod(pod, NS, {"spec": {"nodeName": node}})
    kubelet.core.patch_namespaced_pod_status(pod, NS, {"status": {"phase": "Running", "initContainerStatuses": [
        {"name": "fill-datasets", "image": "cairn", "imageID": "", "ready": True, "restartCount": 0,
         "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": message,
                                  "finishedAt": finished}}}]}})


def test_a_nodes_cache_report_reaches_placement(reconciler, emulator, kubelet, make_workload, k8s_project, k8s_pool,
                                               k8s_cluster, imgs, tmp_path):
    """Emulator only: it moves a bound pod to another node, which a real server forbids."""
    kubelet.add_node("gpu-a")
    kubelet.add_node("gpu-b")
    first = _workload(make_workload, k8s_project, k8s_pool)
    digest = first.spec["datasets"][0]["digest"]
    (pod,) = kubelet.start_job_pods(NS, f"cairn-{first.pk}-{first.attempt}")
    report = _fill_as_the_init_container(emulator, first, tmp_path / "gpu-a-cache", tmp_path)
    assert json.loads(report)["held"] == {digest: 3000}
    _init_done(kubelet, pod, "gpu-a", report, "2026-01-01T00:00:10Z")

    def held_by():
        return set(NodeCacheEntry.objects.filter(cluster=k8s_cluster, version__digest=digest)
                   .values_list("node", flat=True))
    assert eventually(lambda: held_by() == {"gpu-a"}, step=reconciler.reconcile_pass), held_by()

    second = _workload(make_workload, k8s_project, k8s_pool)
    holders, missing = dataset_cache_view(workloads=[second])[second.pk]
    assert holders == {"gpu-a"} and missing == 0, "the scheduler's view: gpu-a holds it, nothing to download"

    # gpu-a's cache later evicts it (another pod's fill there reports a cache without it); an older
    # report seen after that (a reconciler that lists again) does not bring it back.
    (other,) = kubelet.start_job_pods(NS, f"cairn-{second.pk}-{second.attempt}")
    evicted = json.dumps({"v": 1, "at": 1.0, "complete": True, "held": {}, "evicted": [digest]})
    _init_done(kubelet, other, "gpu-a", evicted, "2026-01-01T00:05:00Z")
    assert eventually(lambda: held_by() == set(), step=reconciler.reconcile_pass)
    reconciler.cache_reports_seen.clear()  # as after a restart: both pods' reports are seen again
    reconciler.reconcile_pass()
    assert held_by() == set()


def test_malformed_or_failed_reports_are_ignored_and_a_removed_node_forgets_its_cache(
        reconciler, emulator, kubelet, make_workload, k8s_project, k8s_pool, k8s_cluster, imgs):
    """Emulator only: it moves a bound pod to another node, which a real server forbids."""
    kubelet.add_node("gpu-a")
    workload = _workload(make_workload, k8s_project, k8s_pool)
    digest = workload.spec["datasets"][0]["digest"]
    (pod,) = kubelet.start_job_pods(NS, f"cairn-{workload.pk}-{workload.attempt}")
    for bad in ("not json", json.dumps({"v": 2, "held": {digest: 1}}), json.dumps({"v": 1, "held": {"../x": 1}})):
        _init_done(kubelet, pod, "gpu-a", bad, f"2026-01-01T00:00:0{len(bad) % 10}Z")
        reconciler.reconcile_pass()
    assert not NodeCacheEntry.objects.exists()
    # A fill that failed (exit 75) reports nothing, whatever its message.
    kubelet.core.patch_namespaced_pod_status(pod, NS, {"status": {"initContainerStatuses": [
        {"name": "fill-datasets", "image": "cairn", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": 75, "message": json.dumps({"v": 1, "held": {digest: 1}}),
                                  "finishedAt": "2026-01-01T00:01:00Z"}}}]}})
    reconciler.reconcile_pass()
    assert not NodeCacheEntry.objects.exists()
    good = json.dumps({"v": 1, "complete": True, "held": {digest: 3000}, "evicted": []})
    _init_done(kubelet, pod, "gpu-a", good, "2026-01-01T00:02:00Z")
    assert eventually(lambda: NodeCacheEntry.objects.filter(node="gpu-a").exists(), step=reconciler.reconcile_pass)
    kubelet.core.delete_node("gpu-a")
    assert eventually(lambda: not NodeCacheEntry.objects.exists(), step=reconciler.reconcile_pass)
