"""Datasets through the API against a real S3-compatible server (moto): registration with
encrypted credentials, immutable versions, snapshots; specs that mount them; bad input."""
import hashlib

import pytest

from apps.clusters.crypto import decrypt
from apps.storage.models import Dataset
from tests.s3emu import CREDENTIALS, s3_location

pytestmark = pytest.mark.django_db

P = "/api/v1/projects/vision"


@pytest.fixture
def images(s3_server):
    s3 = s3_server
    s3.make_bucket("corpus")
    s3.put("corpus", "images/a.bin", b"a" * 100)
    s3.put("corpus", "images/sub/b.bin", b"b" * 50)
    s3.put("corpus", "other/c.bin", b"c")
    return s3


def register(client, s3, name="imgs", prefix="images", **extra):
    return client.post(f"{P}/datasets/", {"name": name, "source": "s3", "location": s3_location(s3, "corpus", prefix),
                                          "credentials": CREDENTIALS, **extra}, format="json")


def test_registering_an_s3_prefix_takes_version_1_with_keys_sizes_and_etags(client_for, alice, vera, images):
    answer = register(client_for(alice), images)
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["has_credentials"] is True and "credentials" not in body
    assert [(v["version"], v["files"], v["total_bytes"]) for v in body["versions"]] == [(1, 2, 150)]
    manifest = client_for(vera).get(f"{P}/datasets/imgs/versions/1/").json()["manifest"]
    assert [(m["key"], m["size"]) for m in manifest] == [("a.bin", 100), ("sub/b.bin", 50)]
    assert manifest[0]["etag"].strip('"') == hashlib.md5(b"a" * 100).hexdigest()
    stored = Dataset.objects.get(name="imgs").credentials_encrypted
    assert CREDENTIALS["secret_access_key"] not in stored
    assert decrypt(stored) == '{"access_key_id": "AKIAEXAMPLE", "secret_access_key": "example-secret"}'


def test_a_snapshot_makes_a_new_version_only_when_the_prefix_changed(client_for, alice, images):
    client = client_for(alice)
    register(client, images)
    same = client.post(f"{P}/datasets/imgs/snapshot/")
    assert same.status_code == 200 and same.json() == {"created": False, "version": same.json()["version"]}
    assert same.json()["version"]["version"] == 1
    images.put("corpus", "images/new.bin", b"n" * 7)
    changed = client.post(f"{P}/datasets/imgs/snapshot/")
    assert changed.status_code == 201 and changed.json()["version"]["version"] == 2
    detail = client.get(f"{P}/datasets/imgs/").json()
    assert [(v["version"], v["files"]) for v in detail["versions"]] == [(2, 3), (1, 2)]  # version 1 unchanged


@pytest.mark.parametrize("change, status, words", [
    ({"location": {"bucket": "Bad_Bucket"}}, 400, "bucket name"),
    ({"location": {"bucket": "corpus", "endpoint_url": "ftp://x"}}, 400, "endpoint_url"),
    ({"location": {"bucket": "corpus", "prefix": "a/../b"}}, 400, "without '..'"),
    ({"location": {"bucket": "missing-bucket"}}, 400, "could not be listed"),
    ({"location": {"bucket": "corpus", "endpoint_url": "http://127.0.0.1:9"}}, 400, "loopback address"),
    ({"credentials": {"access_key_id": "x"}}, 400, "secret_access_key"),
    ({"source": "nfs", "location": {"server": "nfs.lab", "path": "relative"}, "credentials": None}, 400,
     "absolute path"),
    ({"source": "host_path", "location": {"path": "/etc"}, "pool": "local", "credentials": None}, 400,
     "outside the allowed directories"),
    ({"source": "host_path", "location": {"path": "/etc"}, "pool": "nope", "credentials": None}, 404, "not found"),
])
def test_bad_sources_are_refused_with_a_detail_and_nothing_is_kept(client_for, alice, images, pool, change, status,
                                                                    words):
    body = {"name": "bad", "source": "s3", "location": s3_location(images, "corpus", "images"),
            "credentials": CREDENTIALS}
    for key, value in change.items():
        if key == "location" and value.get("bucket") and "endpoint_url" not in value:
            value = {**s3_location(images, value["bucket"]), **value}
        body[key] = value
    body = {k: v for k, v in body.items() if v is not None}
    answer = client_for(alice).post(f"{P}/datasets/", body, format="json")
    assert answer.status_code == status, answer.content
    assert words in str(answer.json())
    assert not Dataset.objects.filter(name="bad").exists()


def test_duplicates_conflict_and_outsiders_get_404(client_for, alice, vera, charlie, images):
    register(client_for(alice), images)
    assert register(client_for(alice), images).status_code == 409
    assert client_for(charlie).get(f"{P}/datasets/imgs/").status_code == 404
    assert register(client_for(vera), images, name="x").status_code == 403
    assert client_for(alice).get(f"{P}/datasets/imgs/versions/5/").status_code == 404


def test_host_path_dataset_inside_the_pools_allowed_paths(client_for, alice, shared_dir, pool):
    (shared_dir / "set").mkdir()
    (shared_dir / "set" / "f.txt").write_text("hello")
    answer = client_for(alice).post(f"{P}/datasets/", {"name": "local-set", "source": "host_path", "pool": pool.name,
                                                        "location": {"path": str(shared_dir / "set")}}, format="json")
    assert answer.status_code == 201, answer.content
    manifest = client_for(alice).get(f"{P}/datasets/local-set/versions/1/").json()["manifest"]
    assert manifest == [{"key": "f.txt", "size": 5, "etag":
                         "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}]


@pytest.mark.parametrize("datasets, volumes, status, words", [
    ([{"name": "nope"}], [], 404, "Dataset 'nope' not found"),
    ([{"name": "imgs", "version": 9}], [], 404, "has no version 9"),
    ([{"name": "imgs", "mount": "/etc/x"}], [], 400, "outside the directories"),
    ([{"name": "imgs", "mount": "/data/scratch/imgs"}], [{"name": "scratch"}], 400, "Mount clash"),
])
def test_bad_dataset_mounts_are_refused(client_for, alice, images, quota, datasets, volumes, status, words):
    client = client_for(alice)
    register(client, images)
    client.post(f"{P}/volumes/", {"name": "scratch", "size_gb": 1}, format="json")
    answer = client.post(f"{P}/training-jobs/", {"command": "true", "pool": "local", "datasets": datasets,
                                                 "volumes": volumes}, format="json")
    assert answer.status_code == status, answer.content
    assert words in answer.json()["detail"]


def test_a_spec_resolves_the_latest_version_and_mounts_it_at_datasets_name(client_for, alice, images, quota):
    client = client_for(alice)
    register(client, images)
    answer = client.post(f"{P}/training-jobs/", {"command": "true", "pool": "local", "datasets": [{"name": "imgs"}]},
                         format="json")
    assert answer.status_code == 201, answer.content
    [mounted] = answer.json()["spec"]["datasets"]
    assert (mounted["name"], mounted["version"], mounted["mount"], mounted["source"]) == (
        "imgs", 1, "/datasets/imgs", "s3")


def test_a_bucket_without_credentials_is_read_unsigned(client_for, alice, images):
    answer = client_for(alice).post(f"{P}/datasets/", {"name": "public", "source": "s3",
                                                        "location": s3_location(images, "corpus", "images")},
                                    format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["has_credentials"] is False and answer.json()["versions"][0]["files"] == 2
