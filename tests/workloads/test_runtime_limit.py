"""The run-time limit (`max_runtime_seconds`) of training jobs: accepted, validated field by field,
shown in the API, the OpenAPI schema and the admin; and the clock rules of apps/workloads/deadlines.py."""
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from django.urls import reverse

from apps.quotas.models import UsageRecord
from apps.quotas.services import usage_open
from apps.workloads.deadlines import (
    CLOCK_AWAITS_PODS,
    expected_end,
    format_duration,
    run_deadline,
    run_started_at,
    seconds_left,
)
from apps.workloads.models import Workload
from apps.workloads.services import workload_run_clock_start
from tests.factories import WorkloadFactory

URL = "/api/v1/projects/vision/training-jobs/"


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


def test_a_training_job_is_submitted_with_a_limit_and_shows_it(client):
    response = client.post(URL, {"name": "resnet", "command": "python train.py", "max_runtime_seconds": 7200},
                           format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["max_runtime_seconds"] == 7200
    assert Workload.objects.get(name="resnet").max_runtime_seconds == 7200
    shown = client.get(f"{URL}{response.json()['id']}/").json()
    assert shown["max_runtime_seconds"] == 7200
    listed = client.get(URL).json()["results"]
    assert [w["max_runtime_seconds"] for w in listed] == [7200]


@pytest.mark.parametrize(("sent", "stored"), [(None, None), (60, 60), (2_592_000, 2_592_000), (3600.0, 3600)])
def test_limits_at_the_bounds_null_and_whole_floats_are_accepted(client, sent, stored):
    response = client.post(URL, {"command": "true", "max_runtime_seconds": sent}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["max_runtime_seconds"] == stored


def test_no_limit_when_omitted(client):
    response = client.post(URL, {"command": "true"}, format="json")
    assert response.status_code == 201
    assert response.json()["max_runtime_seconds"] is None


TOO_SHORT = "The run-time limit must be at least 60 seconds."
TOO_LONG = "The run-time limit can be at most 2592000 seconds (30 days)."
NOT_SECONDS = "Give the run-time limit as a whole number of seconds, e.g. 7200 for 2 hours (null: no limit)."


@pytest.mark.parametrize(("value", "message"), [
    (59, TOO_SHORT), (0, TOO_SHORT), (-3600, TOO_SHORT), (2_592_001, TOO_LONG), (10**12, TOO_LONG),
    ("2h", NOT_SECONDS), ("7200", NOT_SECONDS), (True, NOT_SECONDS), (3600.5, NOT_SECONDS), ([7200], NOT_SECONDS),
    ({"hours": 2}, NOT_SECONDS), (1e300, TOO_LONG),
])
def test_bad_limits_are_400_with_a_message_for_the_field(client, value, message):
    response = client.post(URL, {"command": "true", "max_runtime_seconds": value}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["errors"] == {"max_runtime_seconds": [message]}
    assert body["detail"] == f"max_runtime_seconds: {message}"
    assert not Workload.objects.exists()


@pytest.mark.parametrize("route", ["notebooks", "deployments"])
def test_notebooks_and_deployments_have_no_run_time_limit(client, route):
    body = {"max_runtime_seconds": 7200, **({"command": "serve"} if route == "deployments" else {})}
    response = client.post(f"/api/v1/projects/vision/{route}/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"max_runtime_seconds": ["Unknown field."]}


def test_the_openapi_schema_describes_the_field(alice, client_for):
    schema = yaml.safe_load(client_for(alice).get("/api/schema/").content)["components"]["schemas"]
    request = schema["TrainingJobCreateRequest"]["properties"]["max_runtime_seconds"]
    assert (request["type"], request["minimum"], request["maximum"], request["nullable"]) == (
        "integer", 60, 2_592_000, True)
    assert "DeadlineExceeded" in request["description"]
    shown = schema["Workload"]["properties"]["max_runtime_seconds"]
    assert shown["type"] == "integer" and shown["nullable"] is True and shown["readOnly"] is True
    assert "max_runtime_seconds" not in schema["NotebookCreateRequest"]["properties"]


def test_the_admin_shows_the_limit_in_the_list_and_on_the_page(client, admin_user, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, name="limited", max_runtime_seconds=5400)
    WorkloadFactory(project=project, pool=pool, name="unlimited")
    client.force_login(admin_user)
    listing = client.get(reverse("admin:workloads_workload_changelist")).content.decode()
    assert "Run-time limit" in listing and "1h30m" in listing
    page = client.get(reverse("admin:workloads_workload_change", args=[workload.pk])).content.decode()
    assert "Max runtime seconds" in page and "5400" in page
    assert 'name="max_runtime_seconds"' not in page  # shown, not editable: a launched Job carries it


# -- the clock (pure) ------------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_the_clock_starts_at_the_launch_after_the_latest_admission():
    w = Workload(max_runtime_seconds=3600, admitted_at=T0, started_at=T0 + timedelta(seconds=5))
    assert run_started_at(w) == T0 + timedelta(seconds=5)
    assert run_deadline(w) == expected_end(w) == T0 + timedelta(hours=1, seconds=5)
    assert seconds_left(w, now=T0 + timedelta(minutes=30)) == 1805
    assert seconds_left(w, now=T0 + timedelta(hours=2)) == 0


def test_a_requeued_workload_gets_its_full_limit_again_from_its_next_launch():
    # Started at T0, preempted, admitted again at T0 + 3 h, not launched yet.
    w = Workload(max_runtime_seconds=3600, admitted_at=T0 + timedelta(hours=3), started_at=T0)
    assert run_started_at(w) is None and run_deadline(w) is None
    assert seconds_left(w, now=T0 + timedelta(hours=3, minutes=1)) == 3600
    assert expected_end(w) == T0 + timedelta(hours=4)  # for the scheduler: a limit after the admission
    w.started_at = T0 + timedelta(hours=3, seconds=2)  # launched again
    assert run_deadline(w) == T0 + timedelta(hours=4, seconds=2)


def test_launched_into_a_clusters_queue_the_clock_waits_for_the_first_replica():
    # Kueue / Volcano: launched at T0 + 5 s, held by the cluster's queue (clock_awaits_pods).
    w = Workload(max_runtime_seconds=3600, admitted_at=T0, started_at=T0 + timedelta(seconds=5),
                 runtime={CLOCK_AWAITS_PODS: True})
    assert run_started_at(w) is None and run_deadline(w) is None
    assert seconds_left(w, now=T0 + timedelta(hours=5)) == 3600  # however long the queue holds it
    assert expected_end(w) == T0 + timedelta(hours=1)


@pytest.mark.django_db
def test_the_clock_and_the_gpu_hour_charge_start_when_the_first_replica_runs():
    w = WorkloadFactory(status="running", max_runtime_seconds=3600, gpu_milli=1000, admitted_at=T0,
                        started_at=T0 + timedelta(seconds=5), runtime={CLOCK_AWAITS_PODS: True, "attempt": 1})
    usage_open(workload=w, at=T0)
    ran = T0 + timedelta(minutes=10)
    started = workload_run_clock_start(workload_id=w.pk, at=ran)
    assert started.started_at == ran and CLOCK_AWAITS_PODS not in started.runtime and started.runtime["attempt"] == 1
    assert run_deadline(Workload.objects.get(pk=w.pk)) == ran + timedelta(hours=1)
    assert UsageRecord.objects.get(workload=w).started_at == ran  # the hold is not charged
    assert w.events.filter(reason="ReplicasRunning").count() == 1
    assert workload_run_clock_start(workload_id=w.pk, at=ran + timedelta(minutes=1)) is None  # once only
    assert Workload.objects.get(pk=w.pk).started_at == ran


@pytest.mark.django_db
def test_the_clock_start_leaves_a_workload_that_is_not_waiting_for_it_alone():
    w = WorkloadFactory(status="running", max_runtime_seconds=3600, admitted_at=T0, started_at=T0)
    assert workload_run_clock_start(workload_id=w.pk, at=T0 + timedelta(minutes=3)) is None
    assert Workload.objects.get(pk=w.pk).started_at == T0


def test_without_a_limit_there_is_no_deadline():
    w = Workload(max_runtime_seconds=None, admitted_at=T0, started_at=T0)
    assert run_deadline(w) is None and expected_end(w) is None and seconds_left(w, now=T0) is None


@pytest.mark.parametrize(("seconds", "text"), [
    (60, "1m"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m"), (86400 + 3661, "1d1h1m1s"), (2_592_000, "30d"),
    (0, "0s"), (None, "no limit"),
])
def test_durations_read_like_the_cli_writes_them(seconds, text):
    assert format_duration(seconds) == text
