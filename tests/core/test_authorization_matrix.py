"""Every endpoint x method x caller: anonymous -> 401, outsider -> 404, too-low role -> 403,
enough role -> success. Add a row here for every new endpoint (see CONTRIBUTING.md)."""
from dataclasses import dataclass, field

import pytest
from rest_framework.test import APIClient

from tests.factories import (
    MembershipFactory,
    PoolFactory,
    QuotaFactory,
    SweepFactory,
    UserFactory,
    WorkloadFactory,
    make_token,
)

ROLE_ORDER = ["viewer", "member", "maintainer", "owner", "staff"]
CALLERS = ["anonymous", "outsider", "viewer", "member", "maintainer", "owner", "staff"]


@dataclass
class Case:
    method: str
    path: str  # formatted with the ids made by `world`
    needs: str  # least role that may do it: viewer | member | maintainer | owner | staff
    body: dict | None = None
    ok: tuple[int, ...] = (200, 201, 202, 204)
    setup: object = None  # callable(world) run before the request
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}"


def _finish_running(world):
    from apps.sweeps.models import Sweep
    from apps.workloads.models import Workload

    Workload.objects.filter(status="running").update(status="succeeded")
    Sweep.objects.filter(status="running").update(status="stopped")


P = "/api/v1/projects/vision"
CASES = [
    Case("get", f"{P}/", "viewer"),
    Case("patch", f"{P}/", "maintainer", {"name": "Vision 2"}),
    Case("delete", f"{P}/", "owner", setup=_finish_running),
    Case("get", f"{P}/members/", "viewer"),
    Case("get", f"{P}/members/bob/", "viewer"),
    Case("post", f"{P}/members/", "maintainer", {"username": "dave", "role": "member"}),
    Case("patch", f"{P}/members/bob/", "maintainer", {"role": "viewer"}),
    Case("delete", f"{P}/members/bob/", "maintainer"),
    Case("get", f"{P}/quotas/", "viewer"),
    Case("get", f"{P}/quotas/{{quota}}/", "viewer"),
    Case("post", f"{P}/quotas/", "staff", {"pool": "spare", "nominal_gpu_milli": 1000}),
    Case("patch", f"{P}/quotas/{{other_quota}}/", "staff", {"nominal_gpu_milli": 2000}),
    Case("delete", f"{P}/quotas/{{other_quota}}/", "staff"),
    Case("get", f"{P}/workloads/", "viewer"),
    Case("get", f"{P}/audit/", "owner"),
]
for route, kind, body in [
    ("training-jobs", "training", {"command": "echo hi", "pool": "local", "resources": {"cpu": 0.5}}),
    ("notebooks", "notebook", {"pool": "local", "resources": {"cpu": 0.5, "memory": "256Mi"}}),
    ("deployments", "deployment", {"command": "python -m http.server $PORT", "pool": "local"}),
]:
    CASES += [
        Case("get", f"{P}/{route}/", "viewer"),
        Case("post", f"{P}/{route}/", "member", body),
        Case("get", f"{P}/{route}/{{{kind}_running}}/", "viewer"),
        Case("post", f"{P}/{route}/{{{kind}_running}}/stop/", "member"),
        Case("delete", f"{P}/{route}/{{{kind}_done}}/", "member"),
        Case("get", f"{P}/{route}/{{{kind}_running}}/logs/", "viewer"),
        Case("get", f"{P}/{route}/{{{kind}_running}}/events/", "viewer"),
        # The same workload through the kind-independent collection the dashboard reads.
        Case("get", f"{P}/workloads/{{{kind}_running}}/", "viewer"),
        Case("post", f"{P}/workloads/{{{kind}_running}}/stop/", "member"),
        Case("get", f"{P}/workloads/{{{kind}_running}}/logs/", "viewer"),
        Case("get", f"{P}/workloads/{{{kind}_running}}/events/", "viewer"),
    ]
CASES += [  # notebooks: start again (its creator, else maintainers), the culler's view, reclaimed GPU-hours
    Case("post", f"{P}/notebooks/{{notebook_stopped}}/start/", "maintainer"),
    Case("get", f"{P}/notebooks/{{notebook_running}}/activity/", "viewer"),
    Case("get", f"{P}/notebooks/reclaimed/", "viewer"),
]
CASES += [  # self-healing training (docs/training.md)
    Case("get", f"{P}/workloads/{{training_running}}/resilience/", "viewer"),
    Case("get", f"{P}/workloads/{{deployment_running}}/resilience/", "viewer"),
    Case("get", f"{P}/training-jobs/goodput/", "viewer"),
]
CASES += [  # tracking
    Case("get", f"{P}/runs/", "viewer"),
    Case("post", f"{P}/runs/", "member", {"name": "sweep"}),
    Case("get", f"{P}/runs/{{run}}/", "viewer"),
    Case("get", f"{P}/runs/{{run}}/series/?key=loss", "viewer"),
    Case("get", f"{P}/runs/{{run}}/points/?key=loss", "viewer"),
    Case("get", f"{P}/runs/{{run}}/export/", "viewer"),
    Case("get", f"{P}/runs/compare/?runs={{run}}", "viewer"),
    Case("post", f"{P}/runs/{{run}}/batches/", "member", {"points": [{"key": "loss", "step": 1, "value": 0.5}]}),
    Case("post", f"{P}/runs/{{run}}/finish/", "member", {"status": "finished"}),
    Case("delete", f"{P}/runs/{{run}}/", "member"),
    Case("get", f"{P}/workload-telemetry/{{training_running}}/", "viewer"),
]
CASES += [  # sweeps
    Case("get", f"{P}/sweeps/", "viewer"),
    Case("post", f"{P}/sweeps/", "member", {
        "name": "lr", "template": {"command": "echo hi", "pool": "local"}, "objective": {"metric": "acc"},
        "space": {"lr": {"type": "float", "low": 0.001, "high": 0.1, "log": True}}, "budget": {"max_trials": 2}}),
    Case("get", f"{P}/sweeps/{{sweep}}/", "viewer"),
    Case("get", f"{P}/sweeps/{{sweep}}/trials/", "viewer"),
    Case("get", f"{P}/sweeps/{{sweep}}/importance/", "viewer"),
    Case("post", f"{P}/sweeps/{{sweep}}/stop/", "member"),
]


def _volume(world):
    from apps.projects.models import Project
    from apps.storage.models import Volume

    Volume.objects.get_or_create(project=Project.objects.get(slug="vision"), name="scratch", defaults={"size_gb": 1})


def _model(world):
    from apps.projects.models import Project
    from apps.storage.models import ModelVersion, RegisteredModel

    model, _ = RegisteredModel.objects.get_or_create(project=Project.objects.get(slug="vision"), name="tiny")
    ModelVersion.objects.get_or_create(model=model, number=1)


def _dataset(world):
    from apps.projects.models import Project
    from apps.storage.models import Dataset, DatasetVersion

    dataset, _ = Dataset.objects.get_or_create(project=Project.objects.get(slug="vision"), name="nfs-set", defaults={
        "source": "nfs", "location": {"server": "nfs.lab", "path": "/export/set"}})
    DatasetVersion.objects.get_or_create(dataset=dataset, number=1, defaults={"digest": "0" * 64})


CASES += [  # storage
    Case("get", f"{P}/volumes/", "viewer"),
    Case("get", f"{P}/volumes/usage/", "viewer"),
    Case("post", f"{P}/volumes/", "member", {"name": "images", "size_gb": 1}),
    Case("get", f"{P}/volumes/scratch/", "viewer", setup=_volume),
    Case("delete", f"{P}/volumes/scratch/", "maintainer", setup=_volume),
    Case("get", f"{P}/models/", "viewer"),
    Case("get", f"{P}/models/tiny/", "viewer", setup=_model),
    Case("get", f"{P}/models/tiny/versions/1/", "viewer", setup=_model),
    Case("delete", f"{P}/models/tiny/", "maintainer", setup=_model),
    Case("get", f"{P}/datasets/", "viewer"),
    Case("get", f"{P}/datasets/nfs-set/", "viewer", setup=_dataset),
    Case("get", f"{P}/datasets/nfs-set/versions/1/", "viewer", setup=_dataset),
    Case("post", f"{P}/datasets/nfs-set/snapshot/", "member", setup=_dataset),
    Case("post", f"{P}/datasets/", "member", {"name": "nfs2", "source": "nfs",
                                              "location": {"server": "nfs.lab", "path": "/export/x"}}),
    Case("delete", f"{P}/datasets/nfs-set/", "maintainer", setup=_dataset),
]


@pytest.fixture
def world(project, pool, node):
    users = {
        "outsider": UserFactory(username="charlie"),
        "staff": UserFactory(username="root", is_staff=True),
    }
    for role, name in [("viewer", "vera"), ("member", "bob"), ("maintainer", "mia"), ("owner", "alice")]:
        users[role] = UserFactory(username=name)
        MembershipFactory(project=project, user=users[role], role=role)
    UserFactory(username="dave")
    quota = QuotaFactory(project=project, pool=pool)
    other_pool = PoolFactory(name="other", cluster=pool.cluster)
    PoolFactory(name="spare", cluster=pool.cluster)
    other_quota = QuotaFactory(project=project, pool=other_pool)
    ids = {"quota": quota.pk, "other_quota": other_quota.pk}
    for kind in ("training", "notebook", "deployment"):
        ids[f"{kind}_running"] = WorkloadFactory(project=project, pool=pool, kind=kind, status="running").pk
        ids[f"{kind}_done"] = WorkloadFactory(project=project, pool=pool, kind=kind, status="succeeded").pk
    ids["notebook_stopped"] = WorkloadFactory(project=project, pool=pool, kind="notebook", status="stopped").pk
    from tests.tracking.factories import RunFactory

    ids["run"] = RunFactory(project=project).pk
    ids["sweep"] = SweepFactory(project=project, pool=pool).pk
    return {"users": users, "running": ids["training_running"], **ids}


def _expected(case: Case, caller: str) -> str:
    if caller == "anonymous":
        return "401"
    if caller == "outsider":
        return "404"
    if ROLE_ORDER.index(caller) >= ROLE_ORDER.index(case.needs):
        return "ok"
    return "403"


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_authorization_matrix(case: Case, caller: str, world):
    if case.setup:
        case.setup(world)
    client = APIClient()
    if caller != "anonymous":
        client.force_authenticate(world["users"][caller])
    response = getattr(client, case.method)(case.path.format(**world), case.body, format="json")
    expected = _expected(case, caller)
    if expected == "ok":
        assert response.status_code in case.ok, (response.status_code, getattr(response, "data", None))
    else:
        assert response.status_code == int(expected), (response.status_code, getattr(response, "data", None))
        assert "detail" in response.json()


@pytest.mark.parametrize("path", ["/api/v1/me/", "/api/v1/tokens/", "/api/v1/projects/", "/api/v1/clusters/",
                                  "/api/v1/pools/", "/api/v1/nodes/", "/api/v1/cluster/overview/", "/api/schema/"])
def test_global_reads_need_authentication(path, alice, client_for):
    assert client_for().get(path).status_code == 401
    assert client_for(alice).get(path).status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/clusters/", "/api/v1/pools/", "/api/v1/nodes/"])
def test_inventory_is_read_only_over_the_api(path, admin_user, client_for):
    assert client_for(admin_user).post(path, {"name": "x"}, format="json").status_code == 405


def test_outsider_sees_no_trace_of_other_projects(world, client_for, project):
    """charlie owns his own project; nothing of `vision` leaks through any of his routes."""
    charlie = world["users"]["outsider"]
    client = client_for(charlie)
    client.post("/api/v1/projects/", {"slug": "charlies", "name": "Charlie's"}, format="json")
    slugs = [p["slug"] for p in client.get("/api/v1/projects/").json()["results"]]
    assert slugs == ["charlies"]
    job = world["training_running"]
    for path in [f"/api/v1/projects/charlies/training-jobs/{job}/", "/api/v1/projects/charlies/workloads/?name=job-0",
                 f"/api/v1/projects/charlies/training-jobs/{job}/logs/", f"/api/v1/projects/charlies/workloads/{job}/",
                 f"/api/v1/projects/charlies/workloads/{job}/logs/", f"/api/v1/projects/charlies/workloads/{job}/events/"]:
        response = client.get(path)
        assert response.status_code in (200, 404)
        if response.status_code == 200:
            assert response.json()["count"] == 0
    me = client.get("/api/v1/me/").json()
    assert [p["slug"] for p in me["projects"]] == ["charlies"]


def test_read_only_token_cannot_write(world, project):
    token = make_token(world["users"]["owner"], scopes=["read"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get(f"{P}/training-jobs/").status_code == 200
    response = client.post(f"{P}/training-jobs/", {"command": "echo"}, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["detail"]


def test_token_of_outsider_gets_404(world):
    token = make_token(world["users"]["outsider"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get(f"{P}/training-jobs/").status_code == 404


@pytest.mark.parametrize("path", ["/api/v1/clusters/register-kubernetes/", "/api/v1/clusters/{cluster}/check/"])
def test_cluster_registration_is_for_administrators_only(path, world, pool, client_for):
    url = path.format(cluster=pool.cluster.pk)
    assert client_for().post(url, {}, format="json").status_code == 401
    for caller in ("viewer", "member", "maintainer", "owner", "outsider"):
        response = client_for(world["users"][caller]).post(url, {}, format="json")
        assert response.status_code == 403, (caller, response.status_code)
        assert response.json()["detail"]
    staff = client_for(world["users"]["staff"]).post(url, {}, format="json")
    assert staff.status_code not in (401, 403, 500)
