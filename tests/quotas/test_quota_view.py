"""GET /api/v1/projects/<p>/quotas/: per pool nominal, used, borrowed (above nominal), lendable,
limits, GPU-hour budget and what is left of it, in a bounded number of queries."""
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.quotas.models import UsageRecord
from apps.quotas.selectors import budget_period_end, budget_period_start
from tests.factories import PoolFactory, ProjectFactory, QuotaFactory, WorkloadFactory

URL = "/api/v1/projects/vision/quotas/"
pytestmark = pytest.mark.django_db


@pytest.fixture
def quotas(project, pool):
    busy = QuotaFactory(project=project, pool=pool, nominal_gpu_milli=4000, borrowing_limit_gpu_milli=2000,
                        lending_limit_gpu_milli=1000, gpu_hour_budget=Decimal("100"), budget_period="month")
    spare_pool = PoolFactory(name="spare", cluster=pool.cluster)
    idle = QuotaFactory(project=project, pool=spare_pool, nominal_gpu_milli=4000, lending_limit_gpu_milli=1500)
    # 5.5 GPUs held now: 1.5 above the nominal 4.
    WorkloadFactory(project=project, pool=pool, status="running", replicas=2, gpu_milli=2000)
    WorkloadFactory(project=project, pool=pool, status="stopping", gpu_milli=1500)
    WorkloadFactory(project=project, pool=pool, status="queued", gpu_milli=8000)  # holds nothing, not decided yet
    WorkloadFactory(project=project, pool=pool, status="queued", gpu_milli=1000, replicas=3, waiting_on="quota_limit")
    WorkloadFactory(project=project, pool=pool, status="queued", gpu_milli=500, waiting_on="quota_limit")
    WorkloadFactory(project=ProjectFactory(slug="other"), pool=pool, status="running", gpu_milli=8000)  # not ours
    UsageRecord.objects.create(project=project, pool=pool, gpu_milli=4000, attempt=1,
                               started_at=timezone.now() - timedelta(hours=2), ended_at=timezone.now() - timedelta(hours=1))
    return busy, idle


def test_quota_rows_show_used_borrowed_lendable_and_budget(quotas, vera, client_for):
    busy, idle = quotas
    response = client_for(vera).get(URL)
    assert response.status_code == 200
    rows = {row["pool"]: row for row in response.json()["results"]}
    row = rows["local"]
    assert (row["nominal_gpu_milli"], row["borrowing_limit_gpu_milli"], row["lending_limit_gpu_milli"]) == (
        4000, 2000, 1000)
    assert row["gpu_hour_budget"] == "100.00" and row["budget_period"] == "month"
    usage = row["usage"]
    assert usage["used_gpu_milli"] == usage["allocated_gpu_milli"] == 5500
    assert usage["borrowed_gpu_milli"] == 1500 and usage["lendable_gpu_milli"] == 0
    assert usage["queued_gpu_milli"] == 11500
    assert usage["waiting_gpu_milli"] == {"undecided": 8000, "quota_limit": 3500}
    if timezone.now() - timedelta(hours=2) >= budget_period_start("month", timezone.now()):
        assert usage["gpu_hours_this_period"] == pytest.approx(4.0, abs=0.01)
        assert usage["budget_left_gpu_hours"] == pytest.approx(96.0, abs=0.01)
    assert usage["gpu_hour_budget"] == 100.0
    assert usage["period_start"].endswith("Z") and usage["period_end"] > usage["period_start"]

    spare = rows["spare"]["usage"]
    assert spare["used_gpu_milli"] == 0 and spare["borrowed_gpu_milli"] == 0
    assert spare["lendable_gpu_milli"] == 1500  # 4 GPUs unused, lending capped at 1.5
    assert spare["queued_gpu_milli"] == 0 and spare["waiting_gpu_milli"] == {}
    assert spare["gpu_hour_budget"] is None and spare["budget_left_gpu_hours"] is None

    one = client_for(vera).get(f"{URL}{busy.pk}/").json()
    assert one["usage"] == usage


def test_budget_left_is_never_negative(project, pool, alice, client_for):
    # A tiny budget over a month: the usage since the period began overruns it at any time of day
    # (a day's budget of 1 GPU-hour was not yet overrun in the first minutes after midnight).
    QuotaFactory(project=project, pool=pool, gpu_hour_budget=Decimal("0.01"), budget_period="month")
    UsageRecord.objects.create(project=project, pool=pool, gpu_milli=8000, attempt=1,
                               started_at=budget_period_start("month", timezone.now()))
    usage = client_for(alice).get(URL).json()["results"][0]["usage"]
    assert usage["gpu_hours_this_period"] > 0.01 and usage["budget_left_gpu_hours"] == 0.0


def test_budget_period_end():
    assert budget_period_end("day", datetime(2025, 1, 31, tzinfo=UTC)) == datetime(2025, 2, 1, tzinfo=UTC)
    assert budget_period_end("week", datetime(2025, 12, 29, tzinfo=UTC)) == datetime(2026, 1, 5, tzinfo=UTC)
    assert budget_period_end("month", datetime(2025, 12, 1, tzinfo=UTC)) == datetime(2026, 1, 1, tzinfo=UTC)
    assert budget_period_end("month", datetime(2024, 2, 1, tzinfo=UTC)) == datetime(2024, 3, 1, tzinfo=UTC)


def test_list_queries_do_not_grow_with_quotas(quotas, project, pool, alice, client_for, django_assert_max_num_queries):
    client = client_for(alice)
    # 9: the 8 before, and one for the pools' accelerator types and architectures.
    with django_assert_max_num_queries(9):
        assert client.get(URL).status_code == 200
    for i in range(10):
        QuotaFactory(project=project, pool=PoolFactory(name=f"p{i}", cluster=pool.cluster))
    with django_assert_max_num_queries(9):
        assert client.get(URL).json()["count"] == 12


def test_outsider_gets_404(quotas, charlie, client_for):
    response = client_for(charlie).get(URL)
    assert response.status_code == 404 and response.json()["detail"]


def test_a_job_waiting_on_the_cpu_quota_shows_as_cpu_in_usage_and_waits(project, pool, vera, client_for):
    """Quotas are not only GPUs: a CPU-only job over the project's CPU quota shows what it asks for
    and that it waits on CPU (issue 29, item 3)."""
    from apps.scheduling.services import scheduling_cycle
    from tests.factories import NodeFactory

    NodeFactory(pool=pool, name="n1", gpu_count=0, cpu_milli_allocatable=32000, memory_mb_allocatable=64000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=0, nominal_cpu_milli=4000, nominal_memory_mb=16384)
    WorkloadFactory(project=project, pool=pool, status="running", gpu_milli=0, cpu_milli=3000, memory_mb=2048,
                    placement=[{"replica": 0, "node": "n1", "gpus": []}])
    big = WorkloadFactory(project=project, pool=pool, name="cpu-hungry", gpu_milli=0, cpu_milli=2000,
                          memory_mb=1024, replicas=2)
    scheduling_cycle()
    big.refresh_from_db()
    assert big.status == "queued" and big.waiting_on.startswith("quota_"), big.pending_reason

    usage = client_for(vera).get(URL).json()["results"][0]["usage"]
    assert (usage["allocated_cpu_milli"], usage["allocated_memory_mb"]) == (3000, 2048)
    assert (usage["queued_gpu_milli"], usage["queued_cpu_milli"], usage["queued_memory_mb"]) == (0, 4000, 2048)
    assert usage["waiting"] == [{"waiting_on": big.waiting_on, "workloads": 1, "gpu_milli": 0, "cpu_milli": 4000,
                                 "memory_mb": 2048, "resources": ["cpu"]}]


def test_each_quota_shows_its_pools_accelerator_types_and_architectures(project, pool, bob, charlie, client_for):
    from tests.factories import NodeFactory

    NodeFactory(pool=pool, gpu_count=8, accelerator_type="ascend", cpu_arch="arm64")
    NodeFactory(pool=pool, gpu_count=8, accelerator_type="nvidia", cpu_arch="amd64")
    NodeFactory(pool=pool, cpu_arch="amd64")
    QuotaFactory(project=project, pool=pool)
    split = PoolFactory(name="npu-only", cluster=pool.cluster, accelerator_types=["ascend"], architectures=["arm64"])
    QuotaFactory(project=project, pool=split)
    rows = {q["pool"]: q["pool_accelerators"] for q in client_for(bob).get(URL).json()["results"]}
    assert rows == {pool.name: {"types": ["ascend", "nvidia"], "architectures": ["amd64", "arm64"]},
                    "npu-only": {"types": ["ascend"], "architectures": ["arm64"]}}
    assert client_for(charlie).get(URL).status_code == 404
