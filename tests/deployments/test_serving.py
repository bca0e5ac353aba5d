"""The gateway's serving guarantees against real replica processes: readiness gates traffic, a
replica killed with SIGKILL under load costs no request (retried elsewhere, restarted alone by
the reconciler), oversized bodies get 413, and who may call (the authorization matrix)."""
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import close_old_connections

from apps.backends.local import sandbox
from apps.backends.local.reconciler import reconcile_once
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.deployments.conf import setting as serve_setting
from apps.deployments.services import deployment_key_create, deployment_key_revoke
from apps.workloads.choices import WorkloadStatus
from apps.workloads.models import Workload
from tests.backends.helpers import admitted, is_replica_command, reconcile_until, replica_processes, wait_for
from tests.factories import MembershipFactory, ProjectFactory, UserFactory, make_token

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)

# Answers /healthz with 503 until the file ready-<replica> exists in its folder (the shared folder),
# then 200; every other path answers 200 with the replica's number, and is logged as "served".
APP = """
    import os, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    REPLICA = os.environ["CAIRN_REPLICA"]
    GATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"ready-{REPLICA}")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _send(self, status, body):
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/healthz":
                self._send(200 if os.path.exists(GATE) else 503, b"ok")
                return
            print("served", self.path, flush=True)
            self._send(200, REPLICA.encode())

        def do_POST(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                # Read a streamed body to its end before answering, as a real server does (it
                # answered at once before, racing the gateway's size check of the stream).
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if not size:
                        self.rfile.readline()
                        break
                    data += self.rfile.read(size)
                    self.rfile.readline()
            else:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(200, str(len(data)).encode())

    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
    server.daemon_threads = True
    print("listening", flush=True)
    server.serve_forever()
"""


def _url(server, path="hello", name="model"):
    return f"{server.url}/serve/vision/{name}/{path}"


def _bearer(token):
    return {"Authorization": f"Bearer {token}"}


def _ready_count(workload) -> int:
    return sum(bool(r.get("ready")) for r in workload.runtime.get("replicas", []))


def _deploy(project, script, shared_dir, *, replicas, gates=(), name="model", **spec):
    for replica in gates:
        (shared_dir / f"ready-{replica}").touch()
    workload = admitted(kind="deployment", project=project, name=name, replicas=replicas,
                        spec={"command": ["python", script(APP)], "env": {}, "readiness_path": "/healthz", **spec})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    for replica in range(replicas):
        wait_for(lambda replica=replica: "listening" in workload_log_read(workload=workload, replica=replica),
                 what=f"replica {replica} to listen")
    return workload


def _serving_command(workload, replica: int):
    record = next(r for r in workload.runtime["replicas"] if r["replica"] == replica)
    shim = [p for p in replica_processes(Workload(pk=workload.pk, runtime={"replicas": [record]}))]
    # The serving command: not the shim, bubblewrap or its init, nor the bridge (python -c ...).
    commands = [p for p in shim if is_replica_command(p) and "-c" not in p.cmdline()
                and any(part.endswith(".py") for part in p.cmdline())]
    assert len(commands) == 1, [p.cmdline() for p in shim]
    return commands[0]


def test_a_replica_gets_traffic_only_once_its_readiness_check_succeeds(gateway_server, project, bob, script,
                                                                       shared_dir):
    token = make_token(bob)
    workload = _deploy(project, script, shared_dir, replicas=2, gates=[0])
    reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 1)
    reconcile_until(workload, S.RUNNING)  # another pass: replica 1 still fails /healthz
    assert [r["ready"] for r in workload.runtime["replicas"]] == [True, False]
    with httpx.Client(headers=_bearer(token)) as client:
        answers = [client.get(_url(gateway_server)) for _ in range(40)]
    assert [a.status_code for a in answers] == [200] * 40
    assert {a.text for a in answers} == {"0"}
    assert "served" not in workload_log_read(workload=workload, replica=1)  # only probes reached it

    (shared_dir / "ready-1").touch()
    reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 2)
    time.sleep(float(serve_setting("SERVE_AUTH_CACHE_SECONDS")) + 0.2)  # the gateway's kept decision expires
    with httpx.Client(headers=_bearer(token)) as client:
        seen = {client.get(_url(gateway_server)).text for _ in range(40)}
    assert seen == {"0", "1"}


def test_sigkill_of_a_replica_during_2000_requests_fails_none(gateway_server, project, bob, script, shared_dir):
    token = make_token(bob)
    workload = _deploy(project, script, shared_dir, replicas=2, gates=[0, 1])
    reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 2)
    survivor_pid = next(r["pid"] for r in workload.runtime["replicas"] if r["replica"] == 1)
    victim = _serving_command(workload, 0)

    stop = threading.Event()

    def reconciler():  # the reconciler keeps running, as in server mode
        try:
            while not stop.is_set():
                reconcile_once()
                time.sleep(0.1)
        finally:
            close_old_connections()

    loop = threading.Thread(target=reconciler, daemon=True)
    loop.start()
    done = []
    failures = []
    lock = threading.Lock()
    total = 2000

    def worker(client: httpx.Client, count: int):
        for _ in range(count):
            try:
                answer = client.get(_url(gateway_server), timeout=30)
                ok, what = answer.status_code == 200 and answer.text in ("0", "1"), answer.status_code
            except httpx.HTTPError as exc:
                ok, what = False, repr(exc)
            with lock:
                done.append(what)
                if not ok:
                    failures.append(what)

    try:
        with httpx.Client(headers=_bearer(token)) as client, ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(worker, client, total // 8) for _ in range(8)]
            wait_for(lambda: len(done) >= 300, what="300 requests")
            os.kill(victim.pid, signal.SIGKILL)
            for future in futures:
                future.result()
        assert len(done) == total
        assert failures == []
        workload.refresh_from_db()
        reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 2, timeout=30)
    finally:
        stop.set()
        loop.join(10)
    assert workload.status == S.RUNNING and workload.attempt == 1  # no restart of the whole deployment
    records = {r["replica"]: r for r in workload.runtime["replicas"]}
    assert records[0]["restarts"] == 1 and records[1]["pid"] == survivor_pid
    assert workload.events.filter(reason="ReplicaRestarted").exists()
    with httpx.Client(headers=_bearer(token)) as client:  # the restarted replica serves again
        assert {client.get(_url(gateway_server)).text for _ in range(30)} == {"0", "1"}


def test_oversized_body_gets_413(gateway_server, project, bob, script, shared_dir, settings):
    settings.CAIRN = {**settings.CAIRN, "SERVE_MAX_BODY_BYTES": 1000}
    token = make_token(bob)
    workload = _deploy(project, script, shared_dir, replicas=1, gates=[0])
    reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 1)
    fits = httpx.post(_url(gateway_server, "echo"), headers=_bearer(token), content=b"x" * 1000)
    assert fits.status_code == 200 and fits.text == "1000"
    declared = httpx.post(_url(gateway_server, "echo"), headers=_bearer(token), content=b"x" * 1001)
    assert declared.status_code == 413 and "1000 bytes" in declared.json()["detail"]

    def chunks():  # no Content-Length: counted while it streams
        for _ in range(5):
            yield b"y" * 400

    streamed = httpx.post(_url(gateway_server, "echo"), headers=_bearer(token), content=chunks())
    assert streamed.status_code == 413 and "detail" in streamed.json()


@pytest.mark.skipif(sandbox.isolation().level not in (sandbox.BWRAP, sandbox.BWRAP_ROOT),
                    reason="bubblewrap is not usable on this host")
def test_authorization_matrix(gateway_server, project, alice, bob, vera, charlie, script, shared_dir):
    private = _deploy(project, script, shared_dir, replicas=1, gates=[0])
    public = _deploy(project, script, shared_dir, replicas=1, name="open", public=True)
    for workload in (private, public):
        reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 1)
    other = ProjectFactory(slug="other")
    MembershipFactory(project=other, user=UserFactory(username="stranger"), role="owner")
    theirs = admitted(kind="deployment", project=other, name="model", spec={"command": ["true"], "env": {}})
    _, their_key = deployment_key_create(workload=theirs, name="theirs", created_by=None)
    sibling = admitted(kind="deployment", project=project, name="sibling", spec={"command": ["true"], "env": {}})
    _, sibling_key = deployment_key_create(workload=sibling, name="sibling", created_by=None)
    our_row, our_key = deployment_key_create(workload=private, name="ours", created_by=None)
    revoked_row, revoked_key = deployment_key_create(workload=private, name="old", created_by=None)
    deployment_key_revoke(key=revoked_row)

    callers = {
        "anonymous": {},
        "outsider": _bearer(make_token(charlie)),
        "other project's key": _bearer(their_key),
        "another deployment's key": {"X-Cairn-Deployment-Key": sibling_key},
        "revoked key": _bearer(revoked_key),
        "viewer": _bearer(make_token(vera)),
        "member": _bearer(make_token(bob)),
        "owner": _bearer(make_token(alice)),
        "key": {"X-Cairn-Deployment-Key": our_key},
    }
    expected = {  # (private deployment, public deployment)
        "anonymous": (401, 200),
        "outsider": (404, 404),
        "other project's key": (404, 404),
        "another deployment's key": (404, 404),
        "revoked key": (401, 401),
        "viewer": (403, 200),
        "member": (200, 200),
        "owner": (200, 200),
        "key": (200, 404),
    }
    seen = {}
    for who, headers in callers.items():
        answers = [httpx.get(_url(gateway_server, name=name), headers=headers) for name in ("model", "open")]
        seen[who] = tuple(a.status_code for a in answers)
        for answer in answers:
            if answer.status_code != 200:
                assert answer.json()["detail"], who
    assert seen == expected
    unknown = httpx.get(_url(gateway_server, name="nothing"), headers=_bearer(make_token(bob)))
    assert unknown.status_code == 404 and unknown.json()["detail"] == "Deployment not found."
    assert our_row.workload_id == private.pk
