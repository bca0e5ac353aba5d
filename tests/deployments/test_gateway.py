"""The gateway against real replicas: sandboxed deployment replicas are reachable only through
/serve/<project>/<name>/ (their port is in a network namespace of their own), with a member's API
token or a deployment key; answers stream; timeouts, missing replicas and outsiders get clear
answers; a stop still delivers SIGTERM to the serving command."""
import os
import re
import socket
import time

import httpx
import pytest

from apps.backends.local import sandbox
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.backends.tasks import workload_stop_task
from apps.deployments.selectors import deployment_gateway_url
from apps.deployments.services import deployment_key_create, deployment_key_revoke
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload
from apps.workloads.services import workload_stop
from tests.backends.helpers import admitted, gone, reconcile_until, replica_processes, wait_for
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_token

S = WorkloadStatus

pytestmark = pytest.mark.django_db(transaction=True)

SANDBOXED = sandbox.isolation().level in (sandbox.BWRAP, sandbox.BWRAP_ROOT)
needs_bwrap = pytest.mark.skipif(not SANDBOXED, reason="bubblewrap is not usable on this host")

# A small HTTP app on $PORT: /hello echoes what it received, /stream sends three chunks a second
# apart, /slow answers after 5 s. It says which replica it is, and saves a checkpoint on SIGTERM.
APP = """
    import json, os, signal, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    def on_term(signum, frame):
        print("SIGTERM reached the command", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _send(self, status, body, content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Replica", os.environ["CAIRN_REPLICA"])
            self.send_header("Set-Cookie", "sessionid=evil; Path=/")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/stream":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("X-Replica", os.environ["CAIRN_REPLICA"])
                self.end_headers()
                for i in range(3):
                    data = f"data: {i}\\n\\n".encode()
                    self.wfile.write(b"%x\\r\\n%s\\r\\n" % (len(data), data))
                    self.wfile.flush()
                    time.sleep(1)
                self.wfile.write(b"0\\r\\n\\r\\n")
                return
            if self.path == "/slow":
                time.sleep(5)
            body = json.dumps({"path": self.path, "replica": os.environ["CAIRN_REPLICA"],
                               "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
            self._send(200, body)

        def do_POST(self):
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(200, data, "application/octet-stream")

    port = int(os.environ["PORT"])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {port}", flush=True)
    server.serve_forever()
"""


@pytest.fixture
def team(project, alice, bob, vera, charlie):
    return {"alice": make_token(alice), "vera": make_token(vera, scopes=("read",)), "charlie": make_token(charlie)}


def _deploy(project, script, *, replicas=1, name="model"):
    workload = admitted(kind="deployment", project=project, name=name, replicas=replicas,
                        spec={"command": ["python", script(APP)], "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    for replica in range(replicas):
        wait_for(lambda replica=replica: "listening on" in workload_log_read(workload=workload, replica=replica),
                 what=f"replica {replica} to listen")
    return ready(workload, replicas)


def ready(workload, count):
    """Reconcile until `count` replicas passed their readiness check (the gateway's condition)."""
    return reconcile_until(workload, S.RUNNING, condition=lambda w: sum(
        bool(r.get("ready")) for r in w.runtime.get("replicas", [])) >= count)


def _port_of(workload, replica=0) -> int:
    return int(re.search(r"listening on (\d+)", workload_log_read(workload=workload, replica=replica))[1])


def _url(server, path="hello", project="vision", name="model"):
    return f"{server.url}/serve/{project}/{name}/{path}"


def _bearer(token):
    return {"Authorization": f"Bearer {token}"}


@needs_bwrap
def test_sandboxed_replica_is_reachable_through_the_gateway_only(gateway_server, project, team, script):
    workload = _deploy(project, script)
    record = workload.runtime["replicas"][0]
    assert re.search(r"/sock-0/serve-[0-9a-f]{8}\.sock$", record["socket"]) and "port" not in record
    assert workload.runtime["endpoints"] == []
    assert workload.runtime["url"] == deployment_gateway_url(workload)  # the dashboard's link
    port = _port_of(workload)
    with pytest.raises(OSError):  # the replica listens, but in its own network namespace
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert oct(os.stat(os.path.dirname(record["socket"])).st_mode & 0o777) == "0o700"

    with_token = httpx.get(_url(gateway_server), headers={**_bearer(team["alice"]), "Cookie": "sessionid=x; a=b"},
                           params={"q": "1"})
    assert with_token.status_code == 200, with_token.text
    seen = with_token.json()
    assert seen["path"] == "/hello?q=1"
    assert "authorization" not in seen["headers"] and "cookie" not in seen["headers"]
    assert seen["headers"]["x-forwarded-prefix"] == "/serve/vision/model"
    assert "set-cookie" not in with_token.headers  # a deployment cannot set cookies on Cairn's origin
    assert with_token.headers["content-security-policy"].startswith("sandbox")

    assert httpx.get(_url(gateway_server), headers=_bearer(make_token(workload.project.memberships.get(
        role="member").user, scopes=("read",)))).status_code == 200  # a member's read-only token calls it
    _, key = deployment_key_create(workload=workload, name="ci", created_by=None)
    for headers in (_bearer(key), {"X-Cairn-Deployment-Key": key}):
        answer = httpx.get(_url(gateway_server), headers=headers)
        assert answer.status_code == 200
        assert "x-cairn-deployment-key" not in answer.json()["headers"]
        assert "authorization" not in answer.json()["headers"]
        # The replica set a cookie on every answer before: the gateway kept none to send on.
        assert "cookie" not in answer.json()["headers"]
    posted = httpx.post(_url(gateway_server, "echo"), headers=_bearer(key), content=b"x" * 100_000)
    assert posted.status_code == 200 and posted.content == b"x" * 100_000


@needs_bwrap
def test_callers_without_access_get_401_or_404(gateway_server, project, team, script):
    workload = _deploy(project, script)
    other = ProjectFactory(slug="other")
    stranger = UserFactory(username="stranger")
    MembershipFactory(project=other, user=stranger, role="owner")
    other_deployment = admitted(kind="deployment", project=other, name="model", spec={"command": ["true"], "env": {}})
    _, other_key = deployment_key_create(workload=other_deployment, name="theirs", created_by=None)
    key_row, key = deployment_key_create(workload=workload, name="ours", created_by=None)

    def status(headers, **kwargs):
        return httpx.get(_url(gateway_server, **kwargs), headers=headers).status_code

    anonymous = httpx.get(_url(gateway_server))
    assert anonymous.status_code == 401 and "detail" in anonymous.json()
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert status(_bearer("cairn_nope_nope")) == 401
    assert status(_bearer("cairndk_nope_nope")) == 401
    assert status({"Authorization": "Basic YTpi"}) == 401
    assert status(_bearer(team["charlie"])) == 404  # an outsider: as if it did not exist
    assert status(_bearer(make_token(stranger))) == 404  # another project's member
    assert status(_bearer(other_key)) == 404  # a key of another deployment
    assert status(_bearer(team["alice"]), name="nothing") == 404
    assert status(_bearer(team["alice"]), project="nowhere") == 404
    deployment_key_revoke(key=key_row)
    revoked = httpx.get(_url(gateway_server), headers=_bearer(key))
    assert revoked.status_code == 401 and revoked.json()["detail"] == "This deployment key has been revoked."
    assert httpx.get(f"{gateway_server.url}/serve/vision/model", headers=_bearer(team["alice"])).status_code == 308


@needs_bwrap
def test_a_streamed_answer_arrives_chunk_by_chunk(gateway_server, project, team, script):
    _deploy(project, script)
    started = time.monotonic()
    arrivals = []
    with httpx.stream("GET", _url(gateway_server, "stream"), headers=_bearer(team["alice"]), timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for chunk in response.iter_raw():
            arrivals.append((time.monotonic() - started, chunk))
    assert b"".join(c for _, c in arrivals) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert arrivals[0][0] < 1.5  # the first event, long before the replica finished (~3 s)
    assert arrivals[-1][0] >= 2.0


@needs_bwrap
def test_least_outstanding_requests_picks_the_idle_replica(gateway_server, project, team, script):
    _deploy(project, script, replicas=2)
    with httpx.stream("GET", _url(gateway_server, "stream"), headers=_bearer(team["alice"]), timeout=30) as busy:
        busy_replica = busy.headers["x-replica"]
        chunks = busy.iter_raw()
        assert next(chunks) == b"data: 0\n\n"  # the stream is in flight on that replica
        for _ in range(4):
            answer = httpx.get(_url(gateway_server), headers=_bearer(team["alice"]))
            assert answer.json()["replica"] != busy_replica


@needs_bwrap
def test_a_replica_too_slow_to_answer_gets_504(gateway_server, project, team, script, settings):
    settings.CAIRN = {**settings.CAIRN, "SERVE_TIMEOUT_SECONDS": 1.0}
    _deploy(project, script)
    started = time.monotonic()
    answer = httpx.get(_url(gateway_server, "slow"), headers=_bearer(team["alice"]), timeout=30)
    assert answer.status_code == 504
    assert answer.json()["detail"] == "Deployment 'model' did not answer within 1s."
    assert time.monotonic() - started < 4


def test_no_running_replica_gets_503(gateway_server, project, team):
    admitted(kind="deployment", project=project, name="model", spec={"command": ["true"], "env": {}})
    answer = httpx.get(_url(gateway_server), headers=_bearer(team["alice"]))
    assert answer.status_code == 503
    assert "no running replica" in answer.json()["detail"]


@needs_bwrap
def test_a_refused_connection_goes_to_another_replica(gateway_server, project, team, script, settings):
    settings.CAIRN = {**settings.CAIRN, "SERVE_AUTH_CACHE_SECONDS": 0}  # it edits the targets under the gateway
    workload = _deploy(project, script, replicas=2)
    os.unlink(workload.runtime["replicas"][0]["socket"])  # replica 0 cannot be reached any more
    for _ in range(4):
        answer = httpx.get(_url(gateway_server), headers=_bearer(team["alice"]))
        assert answer.status_code == 200 and answer.json()["replica"] == "1"
    runtime = workload.runtime
    for record in runtime["replicas"]:
        record["socket"] = record["socket"] + ".gone"  # neither can be reached now
    Workload.objects.filter(pk=workload.pk).update(runtime=runtime)
    answer = httpx.get(_url(gateway_server), headers=_bearer(team["alice"]))
    assert answer.status_code == 503 and "accepted the connection" in answer.json()["detail"]


@needs_bwrap
def test_stop_still_delivers_sigterm_to_the_serving_command(project, script):
    workload = _deploy(project, script)
    processes = replica_processes(workload)
    names = [p.cmdline() for p in processes]
    assert any("-c" in cmd and "--" in cmd for cmd in names)  # the bridge runs next to the command
    workload_stop(workload=workload)
    workload_stop_task.run(workload_id=workload.pk)
    reconcile_until(workload, S.STOPPED, timeout=20)
    assert "SIGTERM reached the command" in workload_log_read(workload=workload, replica=0)
    assert gone(processes)  # the bridge too
    assert workload.status_reason == "Stopped"
    assert workload.exit_code is None  # stopped by request, not failed


def test_without_bubblewrap_the_replica_keeps_its_tcp_port(gateway_server, project, team, script, settings):
    settings.CAIRN = {**settings.CAIRN, "SANDBOX": "off"}
    sandbox.isolation.cache_clear()
    try:
        workload = _deploy(project, script)
        record = workload.runtime["replicas"][0]
        assert "socket" not in record and workload.runtime["endpoints"] == [f"http://127.0.0.1:{record['port']}/"]
        socket.create_connection(("127.0.0.1", record["port"]), timeout=2).close()  # reachable: documented
        answer = httpx.get(_url(gateway_server), headers=_bearer(team["alice"]))
        assert answer.status_code == 200 and answer.json()["path"] == "/hello"
    finally:
        sandbox.isolation.cache_clear()


@needs_bwrap
def test_a_signed_in_session_may_call_it_and_writes_need_cairns_origin(gateway_server, project, alice, script):
    from django.test import Client

    browser = Client()
    browser.force_login(alice)
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    _deploy(project, script)
    answer = httpx.get(_url(gateway_server), headers=cookie)
    assert answer.status_code == 200 and "cookie" not in answer.json()["headers"]
    cross_site = httpx.post(_url(gateway_server, "echo"), headers={**cookie, "Origin": "https://evil.example"},
                            content=b"hi")
    assert cross_site.status_code == 403 and "Origin" in cross_site.json()["detail"]
    assert httpx.post(_url(gateway_server, "echo"), headers=cookie, content=b"hi").status_code == 403
    same_site = httpx.post(_url(gateway_server, "echo"), headers={**cookie, "Origin": gateway_server.url},
                           content=b"hi")
    assert same_site.status_code == 200 and same_site.content == b"hi"
    assert httpx.get(_url(gateway_server), headers={"Cookie": "sessionid=stale"}).status_code == 401


@needs_bwrap
def test_a_replica_not_listening_yet_is_not_ready_and_gets_no_traffic_503(gateway_server, project, team, script):
    path = script("""
        import time
        print("starting slowly", flush=True)
        time.sleep(60)
    """)
    workload = admitted(kind="deployment", project=project, name="model", spec={"command": ["python", path], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    wait_for(lambda: "starting slowly" in workload_log_read(workload=workload, replica=0), what="the replica to start")
    for _ in range(3):
        reconcile_until(workload, S.RUNNING)
    assert workload.runtime["replicas"][0]["ready"] is False
    answer = httpx.get(_url(gateway_server), headers=_bearer(team["alice"]))
    assert answer.status_code == 503, answer.text
    assert "no ready replica" in answer.json()["detail"]
