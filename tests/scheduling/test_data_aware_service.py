"""Data-aware placement through the scheduling service (real PostgreSQL): a queued workload goes
to the node whose cache holds its datasets when the nodes are otherwise equal, and one whose
datasets no node caches says in its pending reason that its start needs a fill."""
from datetime import timedelta

import pytest

from apps.scheduling.services import scheduling_cycle
from apps.storage.models import Dataset, DatasetVersion, NodeCacheEntry
from apps.workloads.models import Workload
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(project):
    dataset = Dataset.objects.create(project=project, name="imgs", source="s3", location={"bucket": "b"})
    return DatasetVersion.objects.create(dataset=dataset, number=1, digest="d" * 64, total_bytes=40 * 10**9)


def spec(version):
    return {"command": ["true"], "datasets": [{"name": "imgs", "version": 1, "mount": "/datasets/imgs",
                                               "digest": version.digest, "source": "s3"}]}


@pytest.mark.parametrize("holder", ["n1", "n2", "n3"])
def test_the_node_caching_the_dataset_wins_among_equal_nodes(project, pool, version, holder):
    for name in ("n1", "n2", "n3"):
        NodeFactory(pool=pool, name=name, gpu_count=4, cpu_milli_allocatable=32000, memory_mb_allocatable=128000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=96000,
                 nominal_memory_mb=384000)
    NodeCacheEntry.objects.create(cluster=pool.cluster, node=holder, version=version, bytes=version.total_bytes)
    job = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, spec=spec(version))
    plain = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, spec={"command": ["true"]})
    scheduling_cycle()
    job.refresh_from_db()
    plain.refresh_from_db()
    assert job.status == "admitted" and job.placement[0]["node"] == holder
    assert plain.status == "admitted"


@pytest.mark.parametrize(("wait", "node"), [(0, "n1"), (20, "n2")])
def test_a_fuller_holder_wins_over_a_better_fit_only_with_delay_scheduling(project, pool, version, wait, node):
    pool.locality_wait_seconds = wait
    pool.save()
    NodeFactory(pool=pool, name="n1", gpu_count=1, cpu_milli_allocatable=4000, memory_mb_allocatable=16000)
    NodeFactory(pool=pool, name="n2", gpu_count=8, cpu_milli_allocatable=64000, memory_mb_allocatable=256000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=96000,
                 nominal_memory_mb=384000)
    NodeCacheEntry.objects.create(cluster=pool.cluster, node="n2", version=version, bytes=1)
    job = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, cpu_milli=1000, memory_mb=1024,
                          spec=spec(version))
    scheduling_cycle()
    job.refresh_from_db()
    # Bound 0: best fit first, the cache only a tie-break. On: the node holding the data.
    assert job.placement[0]["node"] == node


def test_a_busy_holder_is_waited_for_up_to_the_pools_bound_then_any_node_will_do(project, pool, version):
    pool.locality_wait_seconds = 60
    pool.save()
    for name in ("n1", "n2"):
        NodeFactory(pool=pool, name=name, gpu_count=1, cpu_milli_allocatable=8000, memory_mb_allocatable=32000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=2000, nominal_cpu_milli=16000,
                 nominal_memory_mb=64000)
    WorkloadFactory(project=project, pool=pool, gpu_milli=1000, status="running", preemptible=False,
                    placement=[{"replica": 0, "node": "n2", "gpus": [0]}])
    NodeCacheEntry.objects.create(cluster=pool.cluster, node="n2", version=version, bytes=version.total_bytes)
    job = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, spec=spec(version))
    scheduling_cycle()
    job.refresh_from_db()
    assert job.status == "queued" and job.waiting_on == "locality"
    assert "waiting for a node holding its data (n2 of pool" in job.pending_reason
    assert job.locality_since is not None and job.estimated_start is not None
    first_held = job.locality_since
    scheduling_cycle()
    job.refresh_from_db()
    assert job.status == "queued" and job.locality_since == first_held  # the bound counts from the first hold
    Workload.objects.filter(pk=job.pk).update(locality_since=first_held - timedelta(seconds=61))
    scheduling_cycle()
    job.refresh_from_db()
    assert job.status == "admitted" and job.placement[0]["node"] == "n1"
    assert job.locality_since is None and job.waiting_on == ""


def test_pending_reason_and_estimate_include_the_fill_when_no_node_caches_it(project, pool, version, settings):
    settings.CAIRN = {**settings.CAIRN, "DATASET_FILL_MBPS": 100.0}
    NodeFactory(pool=pool, name="n1", gpu_count=1, cpu_milli_allocatable=32000, memory_mb_allocatable=128000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=1000, nominal_cpu_milli=32000,
                 nominal_memory_mb=128000)
    WorkloadFactory(project=project, pool=pool, gpu_milli=1000, status="running",
                    placement=[{"replica": 0, "node": "n1", "gpus": [0]}], max_runtime_seconds=3600)
    waiting = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, spec=spec(version))
    scheduling_cycle()
    waiting.refresh_from_db()
    assert waiting.status == "queued"
    assert "then about 400 s to fill a node's dataset cache (40.00 GB of its datasets are cached on no node)" in \
        waiting.pending_reason
    NodeCacheEntry.objects.create(cluster=pool.cluster, node="n1", version=version, bytes=version.total_bytes)
    scheduling_cycle()
    waiting.refresh_from_db()
    assert "fill" not in waiting.pending_reason


def test_the_pools_default_bound_is_the_policys():
    from apps.clusters.models import DEFAULT_LOCALITY_WAIT_SECONDS as model_default
    from apps.clusters.models import ResourcePool
    from apps.scheduling.policy import DEFAULT_LOCALITY_WAIT_SECONDS

    assert model_default == DEFAULT_LOCALITY_WAIT_SECONDS
    assert ResourcePool._meta.get_field("locality_wait_seconds").default == DEFAULT_LOCALITY_WAIT_SECONDS
