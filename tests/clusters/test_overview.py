"""GET /api/v1/cluster/overview/: pools and nodes with capacity, allocation (from placements) and
use (latest telemetry), per GPU; bounded queries; no other project's workloads named."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.models import TelemetrySample
from tests.factories import ClusterFactory, NodeFactory, PoolFactory, ProjectFactory, WorkloadFactory

URL = "/api/v1/cluster/overview/"
pytestmark = pytest.mark.django_db


def _telemetry(node, at, gpu, **metrics):
    TelemetrySample.objects.bulk_create([TelemetrySample(time=at, node=node, gpu=gpu, metric=m, value=v)
                                         for m, v in metrics.items()])


@pytest.fixture
def cluster(project, pool):
    pool.accelerator_models = ["NVIDIA A100-SXM4-80GB"]
    pool.save(update_fields=["accelerator_models"])
    a1 = NodeFactory(pool=pool, name="gpu-a1", gpu_count=4, gpu_model="NVIDIA A100-SXM4-80GB", gpu_memory_mb=81920,
                     cpu_milli_allocatable=64000, memory_mb_allocatable=512000)
    a2 = NodeFactory(pool=pool, name="gpu-a2", gpu_count=4, gpu_model="NVIDIA A100-SXM4-80GB", gpu_memory_mb=81920,
                     schedulable=False, health="unhealthy")
    other = ProjectFactory(slug="other")
    # Two replicas of 2 GPUs on a1 (GPUs 0-1 and 2-3), two half-GPU workloads sharing GPU 0 of a2,
    # one stopping (it still holds its GPU), one queued and one finished (they hold nothing).
    WorkloadFactory(project=project, pool=pool, status="running", replicas=2, gpu_milli=2000, cpu_milli=8000,
                    memory_mb=100000, placement=[{"replica": 0, "node": "gpu-a1", "gpus": [0, 1]},
                                                 {"replica": 1, "node": "gpu-a1", "gpus": [2, 3]}])
    WorkloadFactory(project=other, pool=pool, status="running", gpu_milli=500,
                    placement=[{"replica": 0, "node": "gpu-a2", "gpus": [0]}])
    WorkloadFactory(project=other, pool=pool, status="admitted", gpu_milli=500,
                    placement=[{"replica": 0, "node": "gpu-a2", "gpus": [0]}])
    WorkloadFactory(project=other, pool=pool, status="stopping", gpu_milli=1000,
                    placement=[{"replica": 0, "node": "gpu-a2", "gpus": [3]}])
    WorkloadFactory(project=project, pool=pool, status="queued", gpu_milli=1000)
    WorkloadFactory(project=project, pool=pool, status="succeeded", gpu_milli=1000,
                    placement=[{"replica": 0, "node": "gpu-a2", "gpus": [1]}])
    now = timezone.now()
    _telemetry("gpu-a1", now - timedelta(seconds=300), 0, **{"gpu.util_percent": 99.0})  # stale, superseded
    _telemetry("gpu-a1", now - timedelta(seconds=5), 0, **{"gpu.util_percent": 97.0, "gpu.memory_used_mb": 60000.0,
                                                           "gpu.temperature_c": 67.0, "gpu.power_w": 350.0})
    _telemetry("gpu-a1", now - timedelta(seconds=5), 1, **{"gpu.util_percent": 0.5, "gpu.memory_used_mb": 10.0,
                                                           "gpu.memory_free_mb": 90.0})
    _telemetry("gpu-a1", now - timedelta(seconds=5), None, **{"node.cpu_percent": 35.0, "node.memory_percent": 60.0})
    _telemetry("gpu-a2", now - timedelta(seconds=600), 0, **{"gpu.util_percent": 80.0})  # too old to show
    return {"a1": a1, "a2": a2}


def test_overview_shapes_capacity_allocation_and_use(cluster, pool, alice, client_for):
    response = client_for(alice).get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["telemetry_max_age_seconds"] == 120 and body["unpooled_nodes"] == []
    [p] = body["pools"]
    assert p["name"] == pool.name and p["accelerator_models"] == ["NVIDIA A100-SXM4-80GB"]
    assert (p["nodes_total"], p["nodes_schedulable"]) == (2, 1)
    assert (p["capacity_gpus"], p["capacity_gpu_milli"]) == (8, 8000)
    assert p["allocated_gpu_milli"] == 4000 + 500 + 500 + 1000 and p["allocated_gpus"] == 4 + 2
    assert (p["used_gpus"], p["used_gpu_milli"]) == (1, 975)
    a1, a2 = p["nodes"]
    assert a1["name"] == "gpu-a1" and a1["cordoned"] is False and a1["health"] == "healthy"
    assert (a1["allocated_gpu_milli"], a1["allocated_gpus"], a1["allocated_cpu_milli"], a1["allocated_memory_mb"]) == (
        4000, 4, 16000, 200000)
    assert a1["cpu_percent"] == 35.0 and a1["memory_percent"] == 60.0 and a1["telemetry_time"]
    assert [g["index"] for g in a1["gpus"]] == [0, 1, 2, 3]
    g0, g1, g2 = a1["gpus"][:3]
    assert g0 == {"index": 0, "allocated_milli": 1000, "util_percent": 97.0, "memory_used_mb": 60000.0,
                  "memory_total_mb": 81920.0, "temperature_c": 67.0, "power_w": 350.0, "time": g0["time"]}
    assert g0["time"].endswith("Z")
    assert g1["util_percent"] == 0.5 and g1["memory_total_mb"] == 100.0  # used + free from the exporter
    assert g2["util_percent"] is None and g2["time"] is None and g2["memory_total_mb"] == 81920.0
    assert a2["cordoned"] is True and a2["schedulable"] is False and a2["health"] == "unhealthy"
    assert [g["allocated_milli"] for g in a2["gpus"]] == [1000, 0, 0, 1000]  # two halves share GPU 0
    assert a2["allocated_gpus"] == 2 and a2["used_gpus"] == 0 and all(g["util_percent"] is None for g in a2["gpus"])
    assert "workload" not in response.content.decode()  # no project's workloads are named


def test_unpooled_nodes_and_empty_pools(alice, client_for):
    cluster = ClusterFactory(name="lab")
    PoolFactory(name="empty", cluster=cluster)
    NodeFactory(pool=None, cluster=cluster, name="loose", gpu_count=2)
    body = client_for(alice).get(URL).json()
    [empty] = [p for p in body["pools"] if p["name"] == "empty"]
    assert empty["nodes"] == [] and empty["capacity_gpus"] == 0 and empty["accelerator_models"] == []
    assert [n["name"] for n in body["unpooled_nodes"]] == ["loose"]
    assert len(body["unpooled_nodes"][0]["gpus"]) == 2


def test_bad_placements_do_not_break_the_overview(cluster, project, pool, alice, client_for):
    for placement in ([{"node": "gpu-a1", "gpus": ["x", -1, True]}], ["junk"], [{"gpus": [0]}], None,
                      [{"node": "gone", "gpus": [0]}], [{"node": "gpu-a1"}]):
        WorkloadFactory(project=project, pool=pool, status="running", gpu_milli=1000, placement=placement or [])
    response = client_for(alice).get(URL)
    assert response.status_code == 200


def test_query_count_does_not_grow_with_the_cluster(cluster, project, pool, alice, client_for,
                                                    django_assert_max_num_queries):
    client = client_for(alice)
    with django_assert_max_num_queries(8):
        assert client.get(URL).status_code == 200
    at = timezone.now()
    for i in range(30):
        NodeFactory(pool=pool, name=f"bulk-{i}", gpu_count=8)
        WorkloadFactory(project=project, pool=pool, status="running", gpu_milli=1000,
                        placement=[{"replica": 0, "node": f"bulk-{i}", "gpus": [i % 8]}])
        _telemetry(f"bulk-{i}", at, i % 8, **{"gpu.util_percent": 50.0})
    with django_assert_max_num_queries(8):
        body = client.get(URL).json()
    assert body["pools"][0]["nodes_total"] == 32


def test_anonymous_gets_401(client_for):
    response = client_for().get(URL)
    assert response.status_code == 401 and response.json()["detail"]


def test_the_local_node_says_how_its_replicas_are_isolated(alice, client_for, db):
    """The local backend stamps its isolation level on the node; the cluster page warns on "none"."""
    from apps.clusters.choices import ISOLATION_LABEL
    from apps.clusters.services import local_cluster_register

    node = local_cluster_register(isolation="none")
    body = client_for(alice).get(URL).json()
    rows = [n for p in body["pools"] for n in p["nodes"]] + body["unpooled_nodes"]
    assert [n["replica_isolation"] for n in rows if n["name"] == node.name] == ["none"]
    node = local_cluster_register(isolation="bubblewrap+user")  # re-registration keeps the label current
    assert node.labels[ISOLATION_LABEL] == "bubblewrap+user"
    node.labels = {**node.labels, "rack": "r1"}  # an admin's labels are kept
    node.save(update_fields=["labels"])
    assert local_cluster_register().labels == {ISOLATION_LABEL: "bubblewrap+user", "rack": "r1"}


def test_nodes_and_pools_show_vendor_and_architecture(alice, client_for):
    from tests.factories import NodeFactory, PoolFactory

    pool = PoolFactory(name="mixed")
    NodeFactory(pool=pool, name="npu-1", gpu_count=8, gpu_model="910B3", accelerator_type="ascend", cpu_arch="arm64")
    NodeFactory(pool=pool, name="h100-1", gpu_count=8, gpu_model="H100", accelerator_type="nvidia", cpu_arch="amd64")
    body = client_for(alice).get(URL).json()
    [p] = [p for p in body["pools"] if p["name"] == "mixed"]
    assert (p["accelerator_types"], p["architectures"]) == (["ascend", "nvidia"], ["amd64", "arm64"])
    kinds = {n["name"]: (n["accelerator_type"], n["cpu_arch"]) for n in p["nodes"]}
    assert kinds == {"npu-1": ("ascend", "arm64"), "h100-1": ("nvidia", "amd64")}
