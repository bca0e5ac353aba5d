"""working_dir at submit: inside the workload's own folder, or inside a directory the pool allows;
anything else is a 400 with a `detail` naming the field (issue 22, item 2)."""
import pytest

from apps.clusters.models import ResourcePool
from apps.workloads.models import Workload
from tests.factories import TEST_ALLOWED_PATHS, ClusterFactory, PoolFactory, QuotaFactory, WorkloadFactory

URL = "/api/v1/projects/vision/training-jobs/"


@pytest.fixture(autouse=True)
def _pools_allow_nothing(shared_dir):
    """Pools here start as a fresh install's: no allowed directory (not the suite's shared folder)."""
    TEST_ALLOWED_PATHS.clear()


@pytest.fixture
def shared(tmp_path, pool):
    directory = tmp_path / "datasets"
    (directory / "imagenet").mkdir(parents=True)
    ResourcePool.objects.filter(pk=pool.pk).update(allowed_paths=[str(directory)])
    return directory


def submit(client, working_dir, **extra):
    return client.post(URL, {"command": "true", "working_dir": working_dir, **extra}, format="json")


@pytest.mark.parametrize("working_dir", [
    "/", "/etc", "/etc/", "//etc", "/root/.ssh", "/tmp",
    "../../..", "..", "src/../../x",
    "~", "~/x", "~root",
    " ", "x" * 4097,
])
@pytest.mark.parametrize("who", ["alice", "bob"])
def test_outside_the_allowed_roots_is_400(working_dir, who, request, quota, shared, client_for):
    client = client_for(request.getfixturevalue(who))
    response = submit(client, working_dir)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["detail"].startswith("working_dir: "), body
    assert "working_dir" in body["errors"]
    assert not Workload.objects.exists()


def test_data_folder_and_another_workloads_folder_are_400(alice, quota, settings, client_for, project, pool):
    """Even when the pool allows a directory holding them (embedded mode allows the checkout, which
    holds var/, the default data folder)."""
    ResourcePool.objects.filter(pk=pool.pk).update(allowed_paths=[str(settings.CAIRN_DATA_DIR.parent)])
    other = WorkloadFactory(project=project, pool=pool)
    client = client_for(alice)
    for path in [settings.CAIRN_DATA_DIR, settings.CAIRN_DATA_DIR / "workloads" / str(other.pk) / "work",
                 settings.CAIRN_DATA_DIR / "cairn.sqlite3"]:
        response = submit(client, str(path))
        assert response.status_code == 400, path
        assert "data folder" in response.json()["detail"]


def test_nothing_absolute_is_allowed_by_default(alice, quota, client_for, tmp_path):
    response = submit(client_for(alice), str(tmp_path))
    assert response.status_code == 400
    assert "allows no other directory" in response.json()["detail"]


def test_the_message_names_the_allowed_directories(alice, quota, shared, client_for):
    response = submit(client_for(alice), "/etc")
    assert str(shared) in response.json()["detail"]


@pytest.mark.parametrize("working_dir, stored", [("src", "src"), ("out//ckpt/", "out/ckpt"), (".", ".")])
def test_relative_paths_are_accepted(working_dir, stored, alice, quota, client_for):
    response = submit(client_for(alice), working_dir)
    assert response.status_code == 201, response.json()
    assert response.json()["spec"]["working_dir"] == stored


def test_allowed_directory_is_accepted(alice, quota, shared, client_for):
    for path in (shared, shared / "imagenet", f"{shared}/imagenet/"):
        response = submit(client_for(alice), str(path))
        assert response.status_code == 201, response.json()
    assert response.json()["spec"]["working_dir"] == str(shared / "imagenet")


def test_a_viewer_and_an_outsider_still_get_their_usual_answers(vera, charlie, quota, shared, client_for):
    assert submit(client_for(vera), str(shared)).status_code == 403
    assert submit(client_for(charlie), str(shared)).status_code == 404


def test_allowed_paths_are_per_pool(alice, project, quota, shared, client_for):
    other = PoolFactory(name="other", cluster=ClusterFactory(name="local"))
    QuotaFactory(project=project, pool=other)
    assert submit(client_for(alice), str(shared), pool="local").status_code == 201
    response = submit(client_for(alice), str(shared), pool="other")
    assert response.status_code == 400 and "allows no other directory" in response.json()["detail"]


@pytest.mark.parametrize("working_dir, status", [("/workspace", 201), ("/etc", 201), ("workspace", 400),
                                                 ("/a/../b", 400), ("~", 400)])
def test_kubernetes_pool_takes_container_paths(working_dir, status, alice, project, client_for):
    pool = PoolFactory(name="gpu", cluster=ClusterFactory(name="k8s", backend="kubernetes"))
    QuotaFactory(project=project, pool=pool)
    response = submit(client_for(alice), working_dir, pool="gpu")
    assert response.status_code == status, response.json()


def test_pool_api_shows_the_allowed_paths(alice, quota, shared, client_for):
    pools = client_for(alice).get("/api/v1/pools/").json()
    pools = pools.get("results", pools)
    assert [p["allowed_paths"] for p in pools if p["name"] == "local"] == [[str(shared)]]
