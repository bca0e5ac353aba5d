"""A quota's nominal cannot promise more than its pool holds (issue 46, item 12): the API answers
400 naming the pool's total, and the admin form refuses the same, field by field. A pool with no
nodes yet is not checked (its capacity is unknown until they join)."""
import pytest
from django.urls import reverse

from apps.quotas.models import Quota
from tests.factories import NodeFactory, PoolFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/projects/vision/quotas/"


@pytest.fixture
def small_pool(db):
    """Two 2-core, 8 GiB nodes, one of them with a GPU: 4 cores, 16 GiB, 1 GPU in all."""
    pool = PoolFactory(name="small")
    NodeFactory(pool=pool, name="small-a", cpu_milli_allocatable=2000, memory_mb_allocatable=8192, gpu_count=1)
    NodeFactory(pool=pool, name="small-b", cpu_milli_allocatable=2000, memory_mb_allocatable=8192,
                schedulable=False)  # cordoned: still the pool's
    return pool


def test_api_refuses_nominal_beyond_the_pools_capacity(client_for, admin_user, project, small_pool):
    client = client_for(admin_user)
    answer = client.post(URL, {"pool": "small", "nominal_cpu_milli": 16000, "nominal_gpu_milli": 2000,
                               "nominal_memory_mb": 8192}, format="json")
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["errors"]["nominal_cpu_milli"] == [
        "16 CPU cores is more than pool 'small' (2 nodes) has: 4 cores in all."]
    assert body["errors"]["nominal_gpu_milli"] == ["2 GPUs is more than pool 'small' (2 nodes) has: 1 GPUs in all."]
    assert "nominal_memory_mb" not in body["errors"]
    assert not Quota.objects.exists()

    made = client.post(URL, {"pool": "small", "nominal_cpu_milli": 4000, "nominal_gpu_milli": 1000,
                             "nominal_memory_mb": 16384}, format="json")
    assert made.status_code == 201, made.content
    quota = made.json()["id"]
    raised = client.patch(f"{URL}{quota}/", {"nominal_memory_mb": 32768}, format="json")
    assert raised.status_code == 400
    assert raised.json()["errors"]["nominal_memory_mb"] == [
        "32 GiB of memory is more than pool 'small' (2 nodes) has: 16 GiB in all."]
    assert client.patch(f"{URL}{quota}/", {"nominal_cpu_milli": 3000}, format="json").status_code == 200


def test_a_pool_without_nodes_is_not_checked(client_for, admin_user, project):
    PoolFactory(name="empty")
    answer = client_for(admin_user).post(URL, {"pool": "empty", "nominal_cpu_milli": 64000}, format="json")
    assert answer.status_code == 201, answer.content


def test_admin_form_refuses_nominal_beyond_the_pools_capacity(client, admin_user, project, small_pool):
    client.force_login(admin_user)
    response = client.post(reverse("admin:quotas_quota_add"), {
        "project": project.pk, "pool": small_pool.pk, "nominal_gpus": "0", "nominal_cpus": "16",
        "nominal_memory_gib": "8", "borrowing_limit_gpus": "", "lending_limit_gpus": "",
        "gpu_hour_budget": "", "budget_period": "month", "_save": "Save",
    })
    assert response.status_code == 200  # the form again, with the reason
    assert "16 CPU cores is more than pool &#x27;small&#x27; (2 nodes) has: 4 cores in all." in response.content.decode()
    assert not Quota.objects.exists()
