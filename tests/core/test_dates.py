"""Every date-time the API reads (query parameters and bodies) is a 400 JSON with a `detail` when
it lies outside what Python's datetime can hold once in UTC, or outside the range arithmetic on it
needs (issue 44, item 8: these were 500s in HTML from `OverflowError: date value out of range`)."""
import pytest

from tests.factories import WorkloadFactory
from tests.tracking.factories import RunFactory

pytestmark = pytest.mark.django_db

EXTREME = [
    "9999-12-31T23:59:59-23:59",  # no UTC equivalent (year 10000)
    "0001-01-01T00:00:00+00:01",  # no UTC equivalent (year 0)
    "0001-01-01",  # an hour before it (telemetry's default window) is year 0
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31",
]


def _bad(response, field):
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    detail = response.json()["detail"]
    assert field in detail and "out of range" in detail
    return detail


@pytest.mark.parametrize("value", EXTREME)
@pytest.mark.parametrize("field", ["since", "until"])
def test_audit_logs(value, field, alice, admin_user, project, client_for):
    _bad(client_for(admin_user).get("/api/v1/audit/", {field: value}), field)
    _bad(client_for(alice).get(f"/api/v1/projects/{project.slug}/audit/", {field: value}), field)


@pytest.mark.parametrize("value", EXTREME)
@pytest.mark.parametrize("field", ["since", "until"])
def test_telemetry_of_a_workload_and_a_node(value, field, vera, project, pool, admin_user, client_for):
    workload = WorkloadFactory(project=project, pool=pool)
    url = f"/api/v1/projects/{project.slug}/workload-telemetry/{workload.pk}/"
    _bad(client_for(vera).get(url, {"metric": "gpu.util_percent", field: value}), field)
    _bad(client_for(admin_user).get("/api/v1/telemetry/nodes/n1/", {"metric": "gpu.util_percent", field: value}),
         field)


@pytest.mark.parametrize("value", EXTREME)
def test_run_series_by_time_and_workload_list(value, project, vera, client_for):
    run = RunFactory(project=project)
    url = f"/api/v1/projects/{project.slug}/runs/{run.pk}/series/"
    for field in ("time_min", "time_max"):
        _bad(client_for(vera).get(url, {"key": "loss", field: value}), field)
    for field in ("created_after", "created_before"):
        _bad(client_for(vera).get(f"/api/v1/projects/{project.slug}/workloads/", {field: value}), field)


def test_token_expiry_far_in_the_future(alice, client_for):
    response = client_for(alice).post("/api/v1/tokens/", {"name": "ci", "expires_at": "9999-12-31T23:59:59-23:59"},
                                      format="json")
    _bad(response, "expires_at")


def test_dates_in_range_still_work(alice, admin_user, vera, project, pool, client_for):
    assert client_for(admin_user).get("/api/v1/audit/", {"since": "2000-01-01T00:00:00+15:00",
                                                         "until": "9000-01-01T00:00:00-23:59"}).status_code == 200
    workload = WorkloadFactory(project=project, pool=pool)
    url = f"/api/v1/projects/{project.slug}/workload-telemetry/{workload.pk}/"
    ok = client_for(vera).get(url, {"metric": "gpu.util_percent", "until": "0001-01-02T01:00:00Z"})
    assert ok.status_code == 200, ok.content
    assert ok.json()["series"] == []
