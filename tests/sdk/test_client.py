import socket
import threading

import pytest

from cairn import (
    CairnConnectionError,
    CairnError,
    Client,
    Conflict,
    NotFound,
    Unauthorized,
    ValidationFailed,
)
from cairn.client import normalize_url, token_prefix
from tests.sdk.fakeserver import TOKEN


@pytest.fixture
def client(server):
    return Client(server.url, TOKEN, backoff=0)


def test_normalize_url():
    assert normalize_url("localhost:8000/") == "http://localhost:8000"
    assert normalize_url("https://cairn.example/api/v1/") == "https://cairn.example"


def test_token_prefix():
    assert token_prefix(TOKEN) == "0123456789ab"
    assert token_prefix("nonsense") is None


def test_login_returns_the_token_and_uses_it(server):
    client = Client(server.url + "/", backoff=0)
    data = client.login("alice", "wonderland", token_name="laptop")
    assert data["token"] == TOKEN
    login = server.find("POST", "/auth/login/")[0]
    assert login.body == {"username": "alice", "password": "wonderland", "token_name": "laptop"}
    assert "Authorization" not in login.headers
    assert client.me()["username"] == "alice"
    assert server.requests[-1].headers["Authorization"] == f"Bearer {TOKEN}"


def test_wrong_password_is_unauthorized_with_the_servers_detail(server):
    with pytest.raises(Unauthorized) as info:
        Client(server.url).login("alice", "nope")
    assert info.value.status == 401
    assert info.value.detail == "Wrong username or password."


def test_bad_token_is_unauthorized(server):
    with pytest.raises(Unauthorized) as info:
        Client(server.url, "cairn_bad_token").me()
    assert (info.value.status, info.value.detail) == (401, "Invalid token.")


def test_validation_errors_carry_the_field_errors(client):
    with pytest.raises(ValidationFailed) as info:
        client.submit("vision", {"name": "x"})
    assert info.value.errors == {"command": ["This field is required."]}


def test_unknown_project_is_not_found(client):
    with pytest.raises(NotFound) as info:
        client.workloads("nope")
    assert info.value.status == 404 and info.value.detail == "Not found."


def test_html_error_pages_become_a_short_detail(client, server):
    server.fail_next[("GET", "/api/v1/me/")] = [
        (500, "<html><body>Traceback ...</body></html>", "text/html")] * 3
    with pytest.raises(CairnError) as info:
        client.me()
    assert info.value.status == 500
    assert info.value.detail == "Internal Server Error"


def test_idempotent_requests_are_retried_on_5xx(client, server):
    server.fail_next[("GET", "/api/v1/me/")] = [(503, {"detail": "busy"}), (502, {"detail": "x"})]
    assert client.me()["username"] == "alice"
    assert len(server.find("GET", "/me/")) == 3


def test_retries_give_up_with_the_last_error(client, server):
    server.fail_next[("GET", "/api/v1/me/")] = [(503, {"detail": "Try later."})] * 5
    with pytest.raises(CairnError) as info:
        client.me()
    assert (info.value.status, info.value.detail) == (503, "Try later.")
    assert len(server.find("GET", "/me/")) == 3  # 1 + 2 retries


def test_posts_without_an_idempotency_key_are_never_retried(client, server):
    path = "/api/v1/projects/vision/training-jobs/"
    server.fail_next[("POST", path)] = [(503, {"detail": "busy"})]
    with pytest.raises(CairnError) as info:
        client.request("POST", "/projects/vision/training-jobs/", json={"command": "true"})
    assert info.value.status == 503
    assert len(server.find("POST", path)) == 1
    assert server.workloads == {}


def test_submit_sends_an_idempotency_key_and_retries_with_the_same_one(client, server):
    path = "/api/v1/projects/vision/training-jobs/"
    server.fail_next[("POST", path)] = [(503, {"detail": "busy"})]
    w = client.submit("vision", {"name": "x", "command": "true"})
    posts = server.find("POST", path)
    keys = [p.headers.get("Idempotency-Key") for p in posts]
    assert len(posts) == 2 and keys[0] and keys[0] == keys[1]
    assert w["kind"] == "training"
    client.submit("vision", {"name": "y", "command": "true"})
    assert server.find("POST", path)[-1].headers["Idempotency-Key"] not in keys  # a new submit, a new key
    client.submit("vision", {"name": "z", "command": "true"}, idempotency_key="mine")
    assert server.find("POST", path)[-1].headers["Idempotency-Key"] == "mine"


def test_connection_refused_is_a_connection_error(refused_url):
    with pytest.raises(CairnConnectionError) as info:
        Client(refused_url, TOKEN, retries=1, backoff=0).me()
    assert info.value.status is None
    assert "connection refused" in str(info.value)
    assert refused_url in str(info.value)


def test_a_silent_server_times_out():
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(CairnConnectionError, match="timed out"):
            Client(url, TOKEN, timeout=0.2, retries=0).me()


def test_lists_follow_pages_and_keep_the_total(client, server):
    server.page_size = 2
    for _ in range(5):
        server.add_workload()
    everything = client.workloads("vision")
    assert [w["id"] for w in everything] == [5, 4, 3, 2, 1]
    assert everything.total == 5
    first = client.workloads("vision", limit=3)
    assert [w["id"] for w in first] == [5, 4, 3] and first.total == 5


def test_list_filters_are_sent_as_query_parameters(client, server):
    client.workloads("vision", kind="notebook", status=["running", "queued"])
    query = server.find("GET", "/workloads/")[-1].query
    assert query["kind"] == ["notebook"]
    assert query["status"] == ["running", "queued"]
    assert query["ordering"] == ["-created_at"]


@pytest.mark.parametrize(("kind", "route"), [
    ("training", "training-jobs"), ("notebook", "notebooks"), ("deployment", "deployments")])
def test_submit_posts_to_the_kinds_route(client, server, kind, route):
    w = client.submit("vision", {"name": "x", "command": "run"}, kind=kind)
    assert w["kind"] == kind
    assert server.requests[-1].path == f"/api/v1/projects/vision/{route}/"


def test_unknown_kind_is_refused_before_anything_is_created(client, server):
    with pytest.raises(CairnError, match=r"unknown kind 'batch' \(this server runs: training, notebook, deployment\)"):
        client.submit("vision", {}, kind="batch")
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/api/v1/kinds/")]
    client.submit("vision", {"command": "run"}, kind="notebook")  # the server's list is asked once
    assert [(r.method, r.path) for r in server.requests][1:] == [("POST", "/api/v1/projects/vision/notebooks/")]


def test_resolve_by_name_and_by_id(client, server):
    server.add_workload(name="mnist")
    nb = server.add_workload(kind="notebook", name="lab")
    assert client.resolve("vision", "mnist")["id"] == 1
    assert server.requests[-1].query["name"] == ["mnist"]
    assert client.resolve("vision", str(nb["id"]))["kind"] == "notebook"


def test_resolve_refuses_ambiguous_and_unknown_names(client, server):
    server.add_workload(name="dup", status="failed")
    server.add_workload(name="dup", kind="notebook")
    with pytest.raises(CairnError, match="2 workloads are named 'dup'"):
        client.resolve("vision", "dup")
    with pytest.raises(NotFound, match="no workload named 'ghost'"):
        client.resolve("vision", "ghost")


def test_stop_delete_and_conflicts(client, server):
    w = server.add_workload(status="running")
    assert client.stop("vision", w["id"], kind="training")["status"] == "stopping"
    with pytest.raises(Conflict) as info:
        client.delete("vision", w["id"], kind="training")
    assert info.value.status == 409
    w["status"] = "stopped"
    client.delete("vision", w["id"], kind="training")
    assert server.requests[-1].method == "DELETE"
    assert w["id"] not in server.workloads


def test_events_and_logs(client, server):
    w = server.add_workload()
    server.events[w["id"]] = [{"id": 1, "reason": "Submitted"}]
    server.log_chunks[w["id"]] = ["a\n", "b\n", "c\n"]
    assert client.events("vision", w["id"], kind="training")[0]["reason"] == "Submitted"
    assert client.logs("vision", w["id"], kind="training", tail=2) == "b\nc\n"
    query = server.requests[-1].query
    assert query["tail"] == ["2"] and "follow" not in query


@pytest.mark.parametrize("close_delimited", [False, True], ids=["chunked", "close-delimited"])
def test_following_logs_yields_output_as_it_arrives(client, server, close_delimited):
    server.close_delimited_logs = close_delimited
    w = server.add_workload(status="running")
    gate = threading.Event()
    server.log_chunks[w["id"]] = ["épo 1\n", gate, "epoch 2\n"]
    stream = client.iter_logs("vision", w["id"], kind="training", replica=1)
    first = next(stream)
    # The server is still holding the rest back until we open the gate.
    assert first == "épo 1\n"
    assert server.gate_results == []
    gate.set()
    assert "".join(stream) == "epoch 2\n"
    assert server.gate_results == [True]
    query = server.find("GET", "/logs/")[-1].query
    assert query["follow"] == ["1"] and query["replica"] == ["1"]


def test_revoke_current_token(client, server):
    assert client.revoke_current_token() is True
    assert server.requests[-1].method == "DELETE"
    assert server.requests[-1].path == "/api/v1/tokens/7/"
