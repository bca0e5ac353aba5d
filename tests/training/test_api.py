"""The self-healing API: one workload's resilience (goodput, checkpoints, ranks, stragglers,
restarts) on the kind-independent /workloads/<id>/resilience/, the project's training goodput;
spec fields hang_timeout_seconds and straggler_policy."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.training.models import AttemptProgress, Checkpoint
from apps.training.services import replica_progress_record
from apps.workloads.choices import EventType, Kind, WorkloadStatus
from apps.workloads.models import Workload, WorkloadEvent
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db
S = WorkloadStatus


def _event(workload, at, reason, from_status="", to_status="", attachment="", message=""):
    event = WorkloadEvent.objects.create(workload=workload, reason=reason, from_status=from_status,
                                         to_status=to_status, type=EventType.NORMAL, attachment=attachment,
                                         message=message)
    WorkloadEvent.objects.filter(pk=event.pk).update(created_at=at)


@pytest.fixture
def job(project):
    """A 2 x 4-GPU job: attempt 1 ran 0-100 s (checkpoint at 80 s), hung; attempt 2 from 100 s,
    first step at 110 s, succeeded at 200 s."""
    t0 = timezone.now() - timedelta(hours=1)
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, replicas=2, gpu_milli=4000, status=S.SUCCEEDED,
                               attempt=2, started_at=t0, spec={"command": "x", "straggler_policy": "evict"},
                               runtime={"stragglers": [1], "slow_groups": [
                                   {"ranks": [2, 3], "ratio": 3.5, "since": 0,
                                    "placement": [{"replica": 2, "node": "node-c", "gpus": [0]},
                                                  {"replica": 3, "node": "node-c", "gpus": [0]}]}]})
    _event(workload, t0, "Started", "admitted", "running")
    _event(workload, t0 + timedelta(seconds=100), "Hung", message="Hung: replica 1 made no step progress.")
    _event(workload, t0 + timedelta(seconds=200), "Succeeded", "running", "succeeded")
    Checkpoint.objects.create(workload=workload, attempt=1, step=80, size_bytes=10, save_seconds=1,
                              blocking_seconds=1)
    Checkpoint.objects.filter(workload=workload).update(created_at=t0 + timedelta(seconds=80))
    AttemptProgress.objects.create(workload=workload, attempt=1, first_step=0, first_step_at=t0 + timedelta(seconds=5))
    AttemptProgress.objects.create(workload=workload, attempt=2, first_step=81,
                                   first_step_at=t0 + timedelta(seconds=110))
    replica_progress_record(workload_id=workload.pk, attempt=2, replica=0, step=150, steps=[(150, 0.5)])
    return workload


def _resilience(client, workload):
    return client.get(f"/api/v1/projects/{workload.project.slug}/workloads/{workload.pk}/resilience/")


def test_resilience_shows_goodput_checkpoints_ranks_stragglers_and_restarts(client_for, alice, job):
    response = _resilience(client_for(alice), job)
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["goodput"]["wall_seconds"] == pytest.approx(200)
    assert data["goodput"]["lost_seconds"] == pytest.approx(20)  # 80 s -> 100 s, redone
    assert data["goodput"]["redone_seconds"] == pytest.approx(20) and data["goodput"]["hung_seconds"] == 0
    assert data["goodput"]["overhead_seconds"] == pytest.approx(10)  # 100 s -> first step at 110 s
    assert data["goodput"]["goodput"] == pytest.approx(170 / 200)
    assert data["goodput"]["gpu_hours_lost"] == pytest.approx(30 * 8 / 3600)
    assert [(c["step"], c["attempt"], c["size_bytes"]) for c in data["checkpoints"]] == [(80, 1, 10)]
    assert [(r["replica"], r["step"], r["attempt"]) for r in data["ranks"]] == [(0, 150, 2)]
    assert data["stragglers"] == [1] and data["straggler_policy"] == "evict" and data["hang_timeout_seconds"] == 600
    assert data["slow_groups"] == [{"ranks": [2, 3], "ratio": 3.5, "since": 0,
                                    "placement": [{"replica": 2, "node": "node-c", "gpus": [0]},
                                                  {"replica": 3, "node": "node-c", "gpus": [0]}]}]
    assert data["slowdown"] is None
    [restart] = data["restarts"]
    assert (restart["attempt"], restart["cause"], restart["resumed_at_step"]) == (1, "Hung", 81)
    assert restart["message"] == "Hung: replica 1 made no step progress."
    assert (restart["lost_seconds"], restart["overhead_seconds"]) == (pytest.approx(20), pytest.approx(10))


def test_a_hang_counts_as_one_restart_and_its_stuck_time_as_hung(client_for, vera, project):
    """The hang's diagnosis (stacks attached) and its restart both carry the reason Hung: one
    attempt ends, and the time since the rank got stuck (hang_timeout before the diagnosis) is
    hung, the rest since the checkpoint redone."""
    t0 = timezone.now() - timedelta(hours=1)
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, replicas=2, gpu_milli=1000, status=S.SUCCEEDED,
                               attempt=2, started_at=t0, spec={"command": "x", "hang_timeout_seconds": 30})
    _event(workload, t0, "Started", "admitted", "running")
    Checkpoint.objects.create(workload=workload, attempt=1, step=40, size_bytes=1, save_seconds=1, blocking_seconds=0)
    Checkpoint.objects.filter(workload=workload).update(created_at=t0 + timedelta(seconds=40))
    _event(workload, t0 + timedelta(seconds=90), "Hung", attachment="Thread 0x1 (active): ...")  # stuck since 60 s
    _event(workload, t0 + timedelta(seconds=100), "Hung", message="Hung: ... Starting attempt 2 of 3.")
    AttemptProgress.objects.create(workload=workload, attempt=2, first_step=41,
                                   first_step_at=t0 + timedelta(seconds=110))
    _event(workload, t0 + timedelta(seconds=200), "Succeeded", "running", "succeeded")

    data = _resilience(client_for(vera), workload).json()
    goodput = data["goodput"]
    assert (goodput["lost_seconds"], goodput["hung_seconds"], goodput["redone_seconds"]) == (
        pytest.approx(60), pytest.approx(40), pytest.approx(20))
    assert goodput["overhead_seconds"] == pytest.approx(10)
    assert goodput["goodput"] == pytest.approx(130 / 200)
    assert [(r["attempt"], r["cause"], r["hung_seconds"], r["resumed_at_step"]) for r in data["restarts"]] == [
        (1, "Hung", pytest.approx(40), 41)]


def test_a_move_off_a_slow_node_is_a_restart_with_its_cause(client_for, alice, project):
    t0 = timezone.now() - timedelta(hours=1)
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, replicas=2, status=S.RUNNING, attempt=2,
                               started_at=t0, spec={"command": "x"})
    _event(workload, t0, "Started", "admitted", "running")
    _event(workload, t0 + timedelta(seconds=50), "SlowNode", "running", "queued",
           message="Replica 1 is a straggler ... Node n2 cordoned (SlowNode).")
    _event(workload, t0 + timedelta(seconds=60), "Started", "admitted", "running")
    data = _resilience(client_for(alice), workload).json()
    assert [(r["attempt"], r["cause"], r["resumed_at_step"]) for r in data["restarts"]] == [(1, "SlowNode", None)]
    assert data["restarts"][0]["lost_seconds"] == pytest.approx(50)  # no checkpoint: the whole attempt
    assert "cordoned" in data["restarts"][0]["message"]


def test_each_rank_says_how_much_slower_than_its_peers_it_is_and_the_straggler_is_flagged(client_for, bob, project):
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, replicas=3, status=S.RUNNING, attempt=1,
                               started_at=timezone.now(), spec={"command": "x"}, runtime={"stragglers": [2]})
    for replica, seconds in ((0, 1.0), (1, 1.0), (2, 3.0)):
        replica_progress_record(workload_id=workload.pk, attempt=1, replica=replica, step=19,
                                steps=[(step, seconds) for step in range(20)])
    data = _resilience(client_for(bob), workload).json()
    ranks = {r["replica"]: r for r in data["ranks"]}
    assert [ranks[r]["straggler"] for r in (0, 1, 2)] == [False, False, True]
    assert ranks[2]["ratio_to_peer_median"] == pytest.approx(3.0)  # 3 s against its peers' 1 s
    assert ranks[0]["ratio_to_peer_median"] == pytest.approx(0.5)  # 1 s against the median of 1 s and 3 s
    assert ranks[2]["step_seconds"] == 3.0 and ranks[2]["step"] == 19
    assert data["stragglers"] == [2]


def test_a_rank_not_yet_reported_in_the_current_attempt_is_not_flagged(client_for, alice, project):
    workload = WorkloadFactory(project=project, kind=Kind.TRAINING, replicas=2, status=S.RUNNING, attempt=2,
                               started_at=timezone.now(), spec={"command": "x"}, runtime={"stragglers": [1]})
    replica_progress_record(workload_id=workload.pk, attempt=1, replica=1, step=5, steps=[(5, 9.0)])
    [rank] = _resilience(client_for(alice), workload).json()["ranks"]
    assert (rank["attempt"], rank["straggler"], rank["ratio_to_peer_median"]) == (1, False, None)


@pytest.mark.parametrize("kind", [Kind.DEPLOYMENT, Kind.NOTEBOOK])
def test_a_workload_without_ranks_or_checkpoints_answers_neutral(client_for, alice, project, kind):
    workload = WorkloadFactory(project=project, kind=kind, status=S.RUNNING, started_at=timezone.now())
    _event(workload, timezone.now() - timedelta(minutes=5), "Started", "admitted", "running")
    _event(workload, timezone.now() - timedelta(minutes=1), "Restarting")
    response = _resilience(client_for(alice), workload)
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["goodput"]["goodput"] is None and data["goodput"]["wall_seconds"] == 0
    assert (data["checkpoints"], data["ranks"], data["restarts"], data["stragglers"]) == ([], [], [], [])


def test_resilience_is_scoped_to_the_callers_projects(client_for, alice, charlie, job):
    other = WorkloadFactory(kind=Kind.TRAINING)  # in another project, alice is no member of
    assert other.project_id != job.project_id
    client = client_for(alice)
    response = client.get(f"/api/v1/projects/{job.project.slug}/workloads/{other.pk}/resilience/")
    assert response.status_code == 404 and "detail" in response.json()
    assert client.get(f"/api/v1/projects/{other.project.slug}/workloads/{other.pk}/resilience/").status_code == 404
    assert client.get(f"/api/v1/projects/{job.project.slug}/workloads/nope/resilience/").status_code == 404
    assert _resilience(client_for(charlie), job).status_code == 404
    assert _resilience(client_for(None), job).status_code == 401


def test_project_goodput_sums_the_jobs(client_for, vera, job):
    response = client_for(vera).get(f"/api/v1/projects/{job.project.slug}/training-jobs/goodput/")
    assert response.status_code == 200
    data = response.json()
    assert data["jobs"] == 1 and data["gpu_hours_lost"] == pytest.approx(30 * 8 / 3600)
    assert data["goodput"] == pytest.approx(0.85)


def test_outsiders_get_404(client_for, charlie, job):
    client = client_for(charlie)
    assert client.get(f"/api/v1/projects/{job.project.slug}/training-jobs/goodput/").status_code == 404


@pytest.mark.parametrize("fields, error", [({"hang_timeout_seconds": 0}, "hang_timeout_seconds"),
                                           ({"straggler_policy": "kill"}, "straggler_policy"),
                                           ({"straggler_evict_max_fraction": 1.5}, "straggler_evict_max_fraction")])
def test_bad_self_healing_fields_are_400(client_for, alice, project, quota, fields, error):
    response = client_for(alice).post(f"/api/v1/projects/{project.slug}/training-jobs/",
                                      {"command": "echo", **fields}, format="json")
    assert response.status_code == 400 and error in response.json()["detail"]


def test_self_healing_fields_land_in_the_spec(client_for, alice, project, quota):
    response = client_for(alice).post(f"/api/v1/projects/{project.slug}/training-jobs/",
                                      {"command": "echo", "hang_timeout_seconds": 30, "straggler_policy": "evict",
                                       "straggler_evict_max_fraction": 0.5}, format="json")
    assert response.status_code == 201, response.json()
    spec = Workload.objects.get(pk=response.json()["id"]).spec
    assert (spec["hang_timeout_seconds"], spec["straggler_policy"]) == (30, "evict")
    assert spec["straggler_evict_max_fraction"] == 0.5
