"""Scheduling fields on workloads and the queue listing of a pool."""
import pytest

from apps.scheduling.services import scheduling_cycle
from tests.factories import MembershipFactory, NodeFactory, ProjectFactory, QuotaFactory, WorkloadFactory


@pytest.fixture
def full_pool(project, pool):
    """One 2-GPU node held by a running job; three queued jobs, one of another project."""
    NodeFactory(pool=pool, name="n1", gpu_count=2, cpu_milli_allocatable=32000, memory_mb_allocatable=128000)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=8000)
    other = ProjectFactory(slug="nlp")
    QuotaFactory(project=other, pool=pool, nominal_gpu_milli=8000)
    WorkloadFactory(project=other, pool=pool, status="running", gpu_milli=2000, preemptible=False,
                    placement=[{"replica": 0, "node": "n1", "gpus": [0, 1]}])
    mine = [WorkloadFactory(project=project, pool=pool, name=f"job-{i}", gpu_milli=1000, priority=2) for i in range(2)]
    theirs = WorkloadFactory(project=other, pool=pool, name="secret", gpu_milli=1000, priority=1)
    scheduling_cycle()
    return mine, theirs


def test_workload_shows_pending_reason_queue_position_and_estimate(full_pool, alice, client_for):
    mine, _ = full_pool
    body = client_for(alice).get(f"/api/v1/projects/vision/training-jobs/{mine[0].pk}/").json()
    assert body["status"] == "queued"
    assert body["queue_position"] == 2  # behind nlp's P1 job
    assert body["pending_reason"].startswith("capacity: pool")
    assert body["estimated_start"] is None and body["preemptions"] == 0


def test_queue_lists_the_pool_in_order_and_hides_other_projects_details(full_pool, alice, client_for,
                                                                        django_assert_max_num_queries):
    mine, theirs = full_pool
    client = client_for(alice)
    with django_assert_max_num_queries(6):
        response = client.get("/api/v1/pools/local/queue/")
    assert response.status_code == 200, response.json()
    rows = response.json()["results"]
    assert [r["position"] for r in rows] == [1, 2, 3]
    assert rows[0] == {**rows[0], "id": None, "name": None, "project": None, "pending_reason": None, "mine": False,
                       "priority": "P1"}
    assert [r["name"] for r in rows[1:]] == ["job-0", "job-1"]
    assert rows[1]["project"] == "vision" and rows[1]["pending_reason"].startswith("capacity")


def test_staff_see_every_queued_workload(full_pool, admin_user, client_for):
    rows = client_for(admin_user).get("/api/v1/pools/local/queue/").json()["results"]
    assert rows[0]["name"] == "secret" and rows[0]["mine"] is True


def test_member_of_the_other_project_sees_its_own(full_pool, charlie, client_for):
    _, theirs = full_pool
    MembershipFactory(project=theirs.project, user=charlie, role="viewer")
    rows = client_for(charlie).get("/api/v1/pools/local/queue/").json()["results"]
    assert rows[0]["name"] == "secret" and rows[1]["name"] is None


def test_unknown_pool_is_404_with_detail(alice, client_for):
    response = client_for(alice).get("/api/v1/pools/nope/queue/")
    assert response.status_code == 404 and response.json() == {"detail": "Resource pool not found."}


def test_anonymous_gets_401(pool, client_for):
    response = client_for().get(f"/api/v1/pools/{pool.name}/queue/")
    assert response.status_code == 401 and "detail" in response.json()
