"""Model registration (a run's upload), listing with lineage, and deployments that name a model."""
import io
import tarfile

import pytest

from apps.storage.models import ModelVersion
from apps.storage.paths import volume_path
from apps.tracking.models import Param, Run
from apps.tracking.services import run_token_create
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

P = "/api/v1/projects/vision"


def archive(files: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo("link")
            info.type, info.linkname = tarfile.SYMTYPE, symlink
            tar.addfile(info)
    return buffer.getvalue()


def upload(client, run, name, body, token=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(f"/api/v1/projects/{run.project.slug}/runs/{run.pk}/register-model/?name={name}", body,
                       content_type="application/gzip", **headers)


@pytest.fixture
def run(project):
    run = Run.objects.create(project=project, name="train")
    Param.objects.create(run=run, key="lr", value=0.1)
    return run


def test_a_run_token_registers_versions_with_lineage_and_files_are_read_only(client_for, run, alice, vera):
    token = run_token_create(run=run)
    first = upload(client_for(), run, "resnet", archive({"weights.bin": b"abc", "cfg/model.json": b"{}"}), token)
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["ref"] == "resnet@1" and body["run"] == run.pk and body["params"] == {"lr": 0.1}
    assert [f["path"] for f in body["files"]] == ["cfg/model.json", "weights.bin"]
    assert body["files"][1]["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    second = upload(client_for(alice), run, "resnet", archive({"weights.bin": b"abcd"}))
    assert second.status_code == 201 and second.json()["version"] == 2

    folder = volume_path(run.project_id, "artifacts") / "models" / "resnet" / "1"
    assert (folder / "weights.bin").read_bytes() == b"abc"
    assert not (folder.stat().st_mode & 0o222) and not ((folder / "weights.bin").stat().st_mode & 0o222)

    listed = client_for(vera).get(f"{P}/models/").json()["results"]
    assert [(m["name"], m["latest"], m["versions"]) for m in listed] == [("resnet", 2, 2)]
    detail = client_for(vera).get(f"{P}/models/resnet/").json()
    assert [v["version"] for v in detail["versions"]] == [2, 1]
    assert client_for(vera).get(f"{P}/models/resnet/versions/1/").json()["total_bytes"] == 5
    assert client_for(vera).get(f"{P}/models/resnet/versions/9/").status_code == 404


@pytest.mark.parametrize("body, words", [
    (b"not a tar", "not a tar archive"),
    (archive({"../escape": b"x"}), "leads outside"),
    (archive({"a": b"x"}, symlink="/etc/passwd"), "links and devices are refused"),
    (archive({}), "holds no files"),
], ids=["not-a-tar", "dot-dot", "symlink", "empty"])
def test_unsafe_or_broken_archives_are_refused_and_leave_nothing(client_for, run, alice, body, words):
    answer = upload(client_for(alice), run, "resnet", body)
    assert answer.status_code == 400 and words in answer.json()["detail"]
    assert not ModelVersion.objects.exists()
    models = volume_path(run.project_id, "artifacts") / "models"
    assert not models.exists() or not any(models.iterdir())


def test_a_run_token_writes_only_into_its_own_run(client_for, run, alice):
    other = Run.objects.create(project=ProjectFactory(slug="other"), name="x")
    token = run_token_create(run=other)
    answer = upload(client_for(), run, "resnet", archive({"w": b"1"}), token)
    assert answer.status_code == 404
    assert upload(client_for(), run, "Bad Name", archive({"w": b"1"}), run_token_create(run=run)).status_code == 400


def test_outsiders_get_404_viewers_cannot_register_or_delete(client_for, run, alice, vera, charlie):
    upload(client_for(alice), run, "resnet", archive({"w": b"1"}))
    assert client_for(charlie).get(f"{P}/models/resnet/").status_code == 404
    assert upload(client_for(charlie), run, "resnet", archive({"w": b"1"})).status_code == 404
    assert upload(client_for(vera), run, "resnet", archive({"w": b"1"})).status_code == 403
    assert client_for(vera).delete(f"{P}/models/resnet/").status_code == 403


def test_a_deployment_serves_name_at_version_and_links_to_its_run(client_for, run, alice, quota):
    client = client_for(alice)
    upload(client, run, "resnet", archive({"w": b"1"}))
    upload(client, run, "resnet", archive({"w": b"2"}))
    made = client.post(f"{P}/deployments/", {"command": "serve", "pool": "local", "model": "resnet@1"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["model_source"] == {"model": "resnet", "version": 1, "mount": "/model", "run": run.pk,
                                           "workload": None}
    latest = client.post(f"{P}/deployments/", {"command": "serve", "pool": "local", "model": "resnet@latest"},
                         format="json")
    assert latest.json()["spec"]["model"]["version"] == 2
    busy = client.delete(f"{P}/models/resnet/")
    assert busy.status_code == 409 and "served by workload" in busy.json()["detail"]


@pytest.mark.parametrize("ref, status, words", [
    ("nope@1", 404, "Model 'nope' not found"),
    ("resnet@7", 404, "has no version 7"),
    ("resnet@x", 400, "not a version number"),
    ("Bad@1", 400, "not a model name"),
])
def test_bad_model_references_are_refused_with_a_detail(client_for, run, alice, quota, ref, status, words):
    upload(client_for(alice), run, "resnet", archive({"w": b"1"}))
    answer = client_for(alice).post(f"{P}/deployments/", {"command": "serve", "pool": "local", "model": ref},
                                    format="json")
    assert answer.status_code == status and words in answer.json()["detail"]


def test_deleting_a_model_removes_its_files(client_for, run, alice, django_capture_on_commit_callbacks):
    upload(client_for(alice), run, "resnet", archive({"w": b"1"}))
    folder = volume_path(run.project_id, "artifacts") / "models" / "resnet"
    assert folder.is_dir()
    with django_capture_on_commit_callbacks(execute=True):
        assert client_for(alice).delete(f"{P}/models/resnet/").status_code == 204
    assert not folder.exists()
    assert client_for(alice).get(f"{P}/models/resnet/").status_code == 404
