"""Revisions with real processes: a change of env makes revision 2; a canary at 10% gets 10% ± 3%
of 2,000 requests; rollback restores revision 1 on every replica and all of the traffic; a rolling
update replaces the replicas one at a time without a failed request; the API and its errors."""
import threading
import time

import httpx
import pytest
from django.db import close_old_connections
from rest_framework.test import APIClient

from apps.backends.local.reconciler import reconcile_once
from apps.workloads.choices import WorkloadStatus
from cairn.cli import main as cli_main
from tests.backends.helpers import admitted, reconcile_until, wait_for
from tests.deployments.test_serving import _bearer, _ready_count, _url
from tests.factories import make_token

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)

# Answers with its VERSION (from env) on every path.
APP = """
    import os
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait between them

        def log_message(self, *args):
            pass

        def do_GET(self):
            body = os.environ.get("VERSION", "?").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
    server.daemon_threads = True
    server.serve_forever()
"""


def _deployment(project, script, replicas):
    from apps.backends.services import workload_dispatch

    workload = admitted(kind="deployment", project=project, name="model", replicas=replicas,
                        spec={"command": ["python", script(APP)], "env": {"VERSION": "v1"}, "readiness_path": "/"})
    workload_dispatch(workload_id=workload.pk)
    return reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == replicas)


def _api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def _settled(workload, revisions):
    """Reconcile until the replicas run `revisions` (one per replica) and are all ready."""
    return reconcile_until(workload, S.RUNNING, timeout=60, condition=lambda w: sorted(
        (r.get("revision"), bool(r.get("ready"))) for r in w.runtime["replicas"]) == sorted(
        (rev, True) for rev in revisions))


def _count(server, token, n=2000):
    seen: dict[str, int] = {}
    with httpx.Client(headers=_bearer(token)) as client:
        for _ in range(n):
            answer = client.get(_url(server))
            assert answer.status_code == 200, answer.text
            seen[answer.text] = seen.get(answer.text, 0) + 1
    return seen


def test_canary_gets_its_weight_and_rollback_restores_the_previous_revision(
        gateway_server, project, alice, bob, script, monkeypatch, capsys, tmp_path):
    workload = _deployment(project, script, replicas=2)
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    member = _api(bob)
    created = member.post(f"{base}/revisions/", {"env": {"VERSION": "v2"}, "strategy": "canary",
                                                 "canary_weight": 10}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["number"] == 2 and created.json()["spec"]["env"] == {"VERSION": "v2"}
    _settled(workload, [1, 2])  # replica 1 replaced by the canary, replica 0 untouched
    status = member.get(f"{base}/rollout/").json()
    assert status["canary_revision"] == 2 and status["canary_weight"] == 10 and status["complete"]

    seen = _count(gateway_server, make_token(bob))
    assert set(seen) == {"v1", "v2"}
    assert 140 <= seen["v2"] <= 260, seen  # 10% ± 3% of 2,000

    again = member.post(f"{base}/revisions/", {"env": {"VERSION": "v3"}}, format="json")
    assert again.status_code == 409 and "promote or roll it back" in again.json()["detail"]
    # The CLI, against this server, with bob's token.
    monkeypatch.setenv("CAIRN_URL", gateway_server.url)
    monkeypatch.setenv("CAIRN_TOKEN", make_token(bob))
    monkeypatch.setenv("CAIRN_PROJECT", "vision")
    monkeypatch.setenv("CAIRN_CONFIG", str(tmp_path / "cli.json"))
    assert cli_main(["rollout", "status", "model"]) == 0
    shown = capsys.readouterr().out
    assert "canary revision 2 with 10% of requests" in shown and "complete" in shown
    assert cli_main(["rollout", "rollback", "model"]) == 0
    assert "Rolled back: revision 1 serves everything." in capsys.readouterr().out
    assert member.get(f"{base}/rollout/").json()["canary_revision"] is None
    _settled(workload, [1, 1])
    time.sleep(1.1)  # the gateway's kept decision (SERVE_AUTH_CACHE_SECONDS) has expired
    assert _count(gateway_server, make_token(bob), n=200) == {"v1": 200}
    revisions = member.get(f"{base}/revisions/").json()
    assert [r["number"] for r in revisions] == [2, 1]
    assert workload.events.filter(reason="RolloutRolledBack").exists()
    assert member.post(f"{base}/rollout/promote/").status_code == 409  # no canary any more
    assert cli_main(["rollout", "promote", "model"]) == 1
    assert "No canary to promote." in capsys.readouterr().err


def test_rolling_update_replaces_every_replica_without_a_failed_request(gateway_server, project, bob, script):
    workload = _deployment(project, script, replicas=2)
    token = make_token(bob)
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    failures, answers = [], []
    stop = threading.Event()

    def traffic():
        with httpx.Client(headers=_bearer(token)) as client:
            while not stop.is_set():
                try:
                    answer = client.get(_url(gateway_server), timeout=30)
                    (answers if answer.status_code == 200 else failures).append(answer.text)
                except httpx.HTTPError as exc:
                    failures.append(repr(exc))

    def reconciler():
        try:
            while not stop.is_set():
                reconcile_once()
                time.sleep(0.1)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=traffic, daemon=True), threading.Thread(target=reconciler, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        created = _api(bob).post(f"{base}/revisions/", {"env": {"VERSION": "v2"}}, format="json")
        assert created.status_code == 201, created.json()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workload.refresh_from_db()
            records = workload.runtime["replicas"]
            if sorted((r.get("revision"), bool(r.get("ready"))) for r in records) == [(2, True), (2, True)]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"the rolling update did not finish: {workload.runtime['replicas']}")
        # The gateway keeps its view of the targets for up to SERVE_AUTH_CACHE_SECONDS (the old,
        # draining replicas still answer meanwhile): then only revision 2 answers.
        wait_for(lambda: len(answers) > 20 and set(answers[-20:]) == {"v2"}, timeout=15,
                 what="only revision 2 to answer")
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert failures == []
    assert answers[-1] == "v2" and "v1" in answers
    assert workload.spec["env"] == {"VERSION": "v2"}  # a restart of the attempt runs revision 2


def test_revision_api_refuses_bad_input_and_viewers(project, alice, vera, script):
    workload = admitted(kind="deployment", project=project, name="model", replicas=1,
                        spec={"command": ["python", "x.py"], "env": {}})
    from apps.workloads.models import Workload

    Workload.objects.filter(pk=workload.pk).update(status=S.RUNNING)
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    owner = _api(alice)
    assert owner.post(f"{base}/revisions/", {}, format="json").status_code == 400
    for bad in ({"env": {"A": "1"}, "max_surge": 17}, {"env": {"A": "1"}, "max_surge": 0, "max_unavailable": 0},
                {"env": {"A": "1"}, "max_unavailable": -1}, {"resources": {"cpu": 0}},
                {"resources": {"memory": "lots"}}, {"resources": {"disk": 1}}):
        answer = owner.post(f"{base}/revisions/", bad, format="json")
        assert answer.status_code == 400 and answer.json()["detail"], (bad, answer.json())
    both = owner.post(f"{base}/revisions/", {"env": {"A": "1"}, "max_unavailable": 0}, format="json")
    assert "cannot both be 0" in both.json()["detail"]
    same = owner.post(f"{base}/revisions/", {"env": {}}, format="json")
    assert same.status_code == 400 and "Nothing changed" in same.json()["detail"]
    assert _api(vera).post(f"{base}/revisions/", {"env": {"A": "1"}}, format="json").status_code == 403
    assert owner.post(f"{base}/rollout/rollback/").status_code == 409
    assert owner.get(f"{base}/rollout/").json()["stable_revision"] == 1
