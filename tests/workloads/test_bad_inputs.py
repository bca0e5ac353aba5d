"""Bad inputs get a 400 (or 413/415) with a `detail`, never a 500, and store nothing."""
import json

import pytest

from apps.workloads.models import Workload

URL = "/api/v1/projects/vision/training-jobs/"


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


BAD_BODIES = {
    "unknown field": {"command": "true", "gpus": 2},
    "unknown resource field": {"command": "true", "resources": {"gpu": 1, "tpu": 1}},
    "negative gpu": {"command": "true", "resources": {"gpu": -1}},
    "absurd gpu": {"command": "true", "resources": {"gpu": 100000}},
    "fractional multi gpu": {"command": "true", "resources": {"gpu": 1.5}},
    "zero cpu": {"command": "true", "resources": {"cpu": 0}},
    "absurd cpu": {"command": "true", "resources": {"cpu": 1e9}},
    "negative memory": {"command": "true", "resources": {"memory": -5}},
    "garbage memory": {"command": "true", "resources": {"memory": "lots"}},
    "absurd memory": {"command": "true", "resources": {"memory": "900Ti"}},
    "zero replicas": {"command": "true", "replicas": 0},
    "absurd replicas": {"command": "true", "replicas": 10**9},
    "replicas as string": {"command": "true", "replicas": "many"},
    "negative restarts": {"command": "true", "max_restarts": -1},
    "run-time limit too short": {"command": "true", "max_runtime_seconds": 30},
    "run-time limit too long": {"command": "true", "max_runtime_seconds": 31 * 24 * 3600},
    "run-time limit as text": {"command": "true", "max_runtime_seconds": "2h"},
    "bad priority": {"command": "true", "priority": "P9"},
    "bool priority": {"command": "true", "priority": True},
    "missing command": {"replicas": 1},
    "empty command": {"command": "   "},
    "command not strings": {"command": [1, 2]},
    "over-long name": {"command": "true", "name": "x" * 64},
    "uppercase name": {"command": "true", "name": "MyJob"},
    "name with slash": {"command": "true", "name": "a/b"},
    "reserved env": {"command": "true", "env": {"RANK": "3"}},
    "cairn env": {"command": "true", "env": {"CAIRN_PROJECT": "other"}},
    "bad env key": {"command": "true", "env": {"1X": "y"}},
    "env not a map": {"command": "true", "env": ["A=1"]},
    "env value not string": {"command": "true", "env": {"A": {"b": 1}}},
    "resources not a map": {"command": "true", "resources": "big"},
    "body is a list": [{"command": "true"}],
    "unknown pool": {"command": "true", "pool": "nowhere"},
    "over-long pool": {"command": "true", "pool": "p" * 500},
    "huge command": {"command": "x" * 70000},
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_body_is_400_with_detail(client, body):
    response = client.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    assert isinstance(response.json()["detail"], str) and response.json()["detail"]
    assert not Workload.objects.exists()


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"command": "a\\u0000b"}',
                                 b'{"command": "true", "env": {"A\\u0000": "1"}}', b"null", b"42"])
def test_malformed_json_and_nul_bytes_are_400(client, raw):
    response = client.generic("POST", URL, raw, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["detail"]
    assert not Workload.objects.exists()


def test_wrong_content_type_is_415(client):
    response = client.generic("POST", URL, "command=true", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert "Unsupported media type" in response.json()["detail"]


def test_body_too_large_is_413(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"command": "true", "env": {"BIG": "x" * 20_000}})
    response = client.generic("POST", URL, body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["detail"]


@pytest.mark.parametrize("path", ["/api/v1/projects/vision/training-jobs/abc/", "/api/v1/projects/vision/training-jobs/99999999999999999999/",
                                  "/api/v1/projects/no-such/training-jobs/", "/api/v1/projects/vision/training-jobs/1/logs/?replica=-1"])
def test_bad_paths_are_404_or_400(client, path):
    response = client.get(path)
    assert response.status_code in (400, 404)
    assert response.json()["detail"]


def test_bad_query_parameters_are_400(client):
    response = client.get(URL, {"status": "exploded"})
    assert response.status_code == 400 and response.json()["detail"]
    response = client.get(URL, {"page": "abc"})
    assert response.status_code == 400 and response.json()["detail"]


@pytest.mark.parametrize(("path", "body"), [
    ("/api/v1/projects/", {"slug": "Bad Slug", "name": "x"}),
    ("/api/v1/projects/", {"slug": "ok", "name": "x", "owner": "me"}),
    ("/api/v1/projects/", {"slug": "a\u0000b", "name": "x"}),
    ("/api/v1/projects/vision/members/", {"username": "nobody-here"}),
    ("/api/v1/projects/vision/members/", {"username": "alice", "role": "emperor"}),
    ("/api/v1/tokens/", {"name": "t", "scopes": ["root"]}),
    ("/api/v1/tokens/", {"name": "t", "expires_at": "2001-01-01T00:00:00Z"}),
    ("/api/v1/auth/login/", {"username": "alice"}),
])
def test_other_bad_bodies_are_400(client, path, body):
    response = client.post(path, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["detail"]
