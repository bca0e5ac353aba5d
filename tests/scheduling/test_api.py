"""Scheduling fields on workloads and the queue listing of a pool."""
import pytest

from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload
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
    assert body["pending_reason"].startswith("capacity: pool") and body["waiting_on"] == "capacity"
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


def test_queue_and_workload_list_filter_by_what_work_waits_on(full_pool, alice, client_for):
    mine, theirs = full_pool
    client = client_for(alice)
    rows = client.get("/api/v1/pools/local/queue/").json()["results"]
    # The head of the queue holds the pool's reservation; what it waits on names no project, so
    # it is shown (and filtered on) even where its details are not.
    assert [r["waiting_on"] for r in rows] == ["reserved", "capacity", "capacity"] and rows[0]["name"] is None
    reserved = client.get("/api/v1/pools/local/queue/", {"waiting_on": "reserved"}).json()["results"]
    assert [r["position"] for r in reserved] == [1]
    either = client.get("/api/v1/pools/local/queue/?waiting_on=capacity&waiting_on=reserved").json()["results"]
    assert [r["position"] for r in either] == [1, 2, 3]
    listed = client.get("/api/v1/projects/vision/training-jobs/", {"waiting_on": "capacity"}).json()["results"]
    assert sorted(r["name"] for r in listed) == ["job-0", "job-1"]
    assert client.get("/api/v1/projects/vision/training-jobs/", {"waiting_on": "quota_lent"}).json()["results"] == []


@pytest.mark.parametrize("url", ["/api/v1/pools/local/queue/", "/api/v1/projects/vision/training-jobs/"])
def test_unknown_waiting_on_is_400_with_detail(full_pool, alice, client_for, url):
    response = client_for(alice).get(url, {"waiting_on": "gpus"})
    assert response.status_code == 400 and "waiting_on" in str(response.json()), response.json()
    assert "detail" in response.json()


def test_waiting_on_follows_the_decision_and_is_cleared_on_admission(full_pool, project, pool, admin_user, client_for):
    mine, theirs = full_pool
    capped = WorkloadFactory(project=project, pool=pool, name="too-much", gpu_milli=1000, priority=2)
    project.quotas.update(nominal_gpu_milli=0, borrowing_limit_gpu_milli=0)  # vision may use no GPU at all
    scheduling_cycle()
    capped.refresh_from_db()
    assert capped.waiting_on == "quota_limit" and capped.pending_reason.startswith("quota:")
    Workload.objects.filter(status="running").update(status="succeeded")  # the node frees
    scheduling_cycle()
    theirs.refresh_from_db()
    assert theirs.status == "admitted" and theirs.waiting_on == "" and theirs.pending_reason == ""
    body = client_for(admin_user).get(f"/api/v1/projects/nlp/training-jobs/{theirs.pk}/").json()
    assert body["status"] == "admitted" and body["waiting_on"] is None


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


def test_waiting_on_choices_are_the_policys_wait_kinds():
    from apps.scheduling.policy import WAIT_KIND_LABELS, WaitKind
    from apps.workloads.choices import WaitingOn
    from cairn.client import WAITING_ON as CLI_LABELS

    kinds = {v for k, v in vars(WaitKind).items() if k.isupper()}
    assert kinds == set(WaitingOn.values) == set(WAIT_KIND_LABELS) == set(CLI_LABELS)
    assert max(len(v) for v in kinds) <= Workload._meta.get_field("waiting_on").max_length
