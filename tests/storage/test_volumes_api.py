"""Project volumes through the API: create, list with usage, quota, delete; specs that mount them."""
import pytest

from apps.storage.models import StorageQuota, Volume
from apps.storage.paths import volume_path
from tests.factories import ProjectFactory, WorkloadFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/projects/vision/volumes/"
JOBS = "/api/v1/projects/vision/training-jobs/"


def test_member_creates_a_volume_and_everyone_in_the_project_sees_it_with_usage(client_for, alice, bob, vera, quota):
    answer = client_for(bob).post(URL, {"name": "images", "size_gb": 5}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["default_mount"] == "/data/images"
    folder = volume_path(Volume.objects.get(name="images").project_id, "images")
    assert folder.is_dir()
    (folder / "a.bin").write_bytes(b"x" * 1000)

    listed = client_for(vera).get(URL).json()
    assert [(v["name"], v["size_gb"], v["used_bytes"]) for v in listed] == [("images", 5, 1000)]
    usage = client_for(vera).get(URL + "usage/").json()
    assert usage == {"quota_gb": 100, "declared_gb": 5, "used_bytes": 1000}
    assert client_for(vera).get(URL + "images/").json()["used_bytes"] == 1000


def test_outsider_gets_404_and_viewer_cannot_create(client_for, alice, vera, charlie, quota):
    client_for(alice).post(URL, {"name": "images", "size_gb": 5}, format="json")
    assert client_for(charlie).get(URL).status_code == 404
    assert client_for(charlie).get(URL + "images/").status_code == 404
    assert client_for(vera).post(URL, {"name": "x", "size_gb": 1}, format="json").status_code == 403


def test_another_projects_volume_is_not_found(client_for, alice):
    other = ProjectFactory(slug="other")
    Volume.objects.create(project=other, name="secret", size_gb=1)
    assert client_for(alice).get(URL + "secret/").status_code == 404
    assert client_for(alice).delete(URL + "secret/").status_code == 404


def test_quota_duplicates_and_bad_names_are_refused_with_a_detail(client_for, alice, project):
    StorageQuota.objects.create(project=project, volume_gb=10)
    assert client_for(alice).post(URL, {"name": "a", "size_gb": 8}, format="json").status_code == 201
    over = client_for(alice).post(URL, {"name": "b", "size_gb": 3}, format="json")
    assert over.status_code == 400
    assert "may declare 10 GiB" in over.json()["detail"]
    dup = client_for(alice).post(URL, {"name": "a", "size_gb": 1}, format="json")
    assert dup.status_code == 409 and "already exists" in dup.json()["detail"]
    bad = client_for(alice).post(URL, {"name": "Bad_Name", "size_gb": 1}, format="json")
    assert bad.status_code == 400 and "name" in bad.json()["errors"]
    assert client_for(alice).post(URL, {"name": "z", "size_gb": 0}, format="json").status_code == 400


def test_deleting_needs_a_maintainer_and_no_unfinished_workload_mounting_it(
        client_for, alice, bob, project, pool, django_capture_on_commit_callbacks):
    client_for(alice).post(URL, {"name": "images", "size_gb": 1}, format="json")
    folder = volume_path(project.pk, "images")
    assert client_for(bob).delete(URL + "images/").status_code == 403
    job = WorkloadFactory(project=project, pool=pool, status="running",
                          spec={"volumes": [{"name": "images", "mount": "/data/images", "read_only": False}]})
    busy = client_for(alice).delete(URL + "images/")
    assert busy.status_code == 409 and job.name in busy.json()["detail"]
    WorkloadFactory._meta.model.objects.filter(pk=job.pk).update(status="succeeded")
    assert folder.is_dir()
    with django_capture_on_commit_callbacks(execute=True):
        answer = client_for(alice).delete(URL + "images/")
    assert answer.status_code == 204
    assert not Volume.objects.filter(name="images").exists()
    assert not folder.exists()  # its files went with it


@pytest.mark.parametrize("volumes, status, words", [
    ([{"name": "nope"}], 404, "Volume 'nope' not found"),
    ([{"name": "images", "mount": "/usr/lib/x"}], 400, "outside the directories mounts may use"),
    ([{"name": "images", "mount": "data/x"}], 400, "not an absolute path"),
    ([{"name": "images", "mount": "/data/../etc"}], 400, "'..'"),
    ([{"name": "images", "mount": "/data"}], 400, "outside the directories"),
    ([{"name": "images"}, {"name": "other", "mount": "/data/images/sub"}], 400, "Mount clash"),
    ([{"name": "images", "host_path": "/etc"}], 400, "Host paths cannot be mounted"),
])
def test_bad_volume_mounts_in_a_spec_are_refused_with_a_detail(client_for, alice, quota, volumes, status, words):
    client = client_for(alice)
    client.post(URL, {"name": "images", "size_gb": 1}, format="json")
    client.post(URL, {"name": "other", "size_gb": 1}, format="json")
    answer = client.post(JOBS, {"command": "true", "pool": "local", "volumes": volumes}, format="json")
    assert answer.status_code == status, answer.content
    assert words in str(answer.json())


def test_a_spec_mounts_volumes_at_data_name_by_default(client_for, alice, quota):
    client = client_for(alice)
    client.post(URL, {"name": "images", "size_gb": 1}, format="json")
    answer = client.post(JOBS, {"command": "true", "pool": "local", "volumes": [
        {"name": "images"}, {"name": "images", "mount": "/mnt/ro", "read_only": True}]}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["spec"]["volumes"] == [
        {"name": "images", "mount": "/data/images", "read_only": False},
        {"name": "images", "mount": "/mnt/ro", "read_only": True},
    ]
