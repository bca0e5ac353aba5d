"""Rollouts that change the size of the replicas or run extra ones, with real processes, the
scheduler and the reconciler: a new size is a revision rolled out without a failed request, and
refused (409, nothing changed) when it does not fit the quota; `max_surge` starts a replica of
the new revision, admitted by the scheduler under the quota, before an old one stops (the surge
replica then takes the old one's place: the update starts as many new replicas as the deployment
has), and waits with a reason when the quota is full; a single-replica deployment's canary runs on a surge
replica with its traffic weight, and promote or rollback end with one replica."""
import threading
import time

import httpx
import pytest
from django.db import close_old_connections
from rest_framework.test import APIClient

from apps.deployments.models import DeploymentRevision
from apps.quotas.models import UsageRecord
from apps.quotas.services import usage_open
from apps.scheduling.services import scheduling_cycle
from apps.workloads.choices import WorkloadStatus
from cairn.cli import main as cli_main
from tests.backends.helpers import reconcile_until, wait_for
from tests.deployments.test_rollouts import APP, _count
from tests.deployments.test_scaling import Loops
from tests.deployments.test_serving import _bearer, _ready_count, _url
from tests.factories import NodeFactory, QuotaFactory, make_token

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def capacity(project, pool):
    NodeFactory(pool=pool, name="node-a")
    return QuotaFactory(project=project, pool=pool, nominal_cpu_milli=1000)  # two replicas of 500m


def _deployment(project, script, replicas):
    from apps.backends.services import workload_dispatch
    from tests.backends.helpers import admitted

    workload = admitted(kind="deployment", project=project, name="model", replicas=replicas,
                        spec={"command": ["python", script(APP)], "env": {"VERSION": "v1"}, "readiness_path": "/"})
    workload_dispatch(workload_id=workload.pk)
    return reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == replicas)


def _api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def _runs(workload):
    return sorted((r.get("revision"), bool(r.get("ready"))) for r in workload.runtime["replicas"])


class Traffic:
    """Requests through the gateway in a thread while a rollout runs, every answer kept; and, in
    another thread, the deployment's replicas every 20 ms (far more often than a reconciler pass)."""

    def __init__(self, server, token, workload):
        self.server, self.token, self.workload = server, token, workload
        self.answers, self.failures, self.samples = [], [], []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._requests, daemon=True),
                        threading.Thread(target=self._sample, daemon=True)]

    def _requests(self):
        with httpx.Client(headers=_bearer(self.token)) as client:
            while not self.stop.is_set():
                try:
                    answer = client.get(_url(self.server), timeout=30)
                    (self.answers if answer.status_code == 200 else self.failures).append(answer.text)
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))

    def _sample(self):
        from apps.workloads.models import Workload

        try:
            while not self.stop.is_set():
                runtime = Workload.objects.get(pk=self.workload.pk).runtime
                self.samples.append({r.get("pid"): (r.get("revision"), bool(r.get("ready")))
                                     for r in runtime.get("replicas", [])})
                time.sleep(0.02)
        finally:
            close_old_connections()

    def old_replaced_only_with_more_ready_than(self, replicas: int, old: int) -> None:
        """Each replica of revision `old` left (was drained) only when more than `replicas` were
        ready just before: the rollout itself never took the deployment below `replicas` ready.
        (A readiness probe that fails under load may still, on its own, for a moment.)"""
        drained = 0
        for before, after in zip(self.samples, self.samples[1:], strict=False):
            gone = [pid for pid, (revision, _) in before.items() if revision == old and pid not in after]
            if gone:
                drained += len(gone)
                ready = sum(ready for _, ready in before.values())
                assert ready - len(gone) >= replicas, (before, after)
        assert drained, "no replica of the old revision was seen leaving"

    def started(self, *, revision: int) -> set[int]:
        """The processes of `revision` seen during the rollout."""
        return {pid for sample in self.samples for pid, (rev, _) in sample.items() if rev == revision}

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


def test_a_new_size_is_a_revision_rolled_out_without_a_failed_request(
        gateway_server, project, pool, capacity, bob, script):
    capacity.nominal_cpu_milli = 2000  # room for two replicas of 1 CPU
    capacity.save()
    workload = _deployment(project, script, replicas=2)
    usage_open(workload=workload)  # charged as the scheduler's admission does
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    with Traffic(gateway_server, make_token(bob), workload) as traffic, Loops():
        created = _api(bob).post(f"{base}/revisions/", {"resources": {"cpu": 1, "memory": "512Mi"}}, format="json")
        assert created.status_code == 201, created.json()
        assert created.json()["spec"]["resources"] == {"gpu_milli": 0, "cpu_milli": 1000, "memory_mb": 512}
        wait_for(lambda: _runs(reconcile_until(workload, S.RUNNING)) == [(2, True), (2, True)], timeout=60,
                 interval=0.2, what="both replicas to run revision 2")
        wait_for(lambda: len(traffic.answers) > 50, what="requests after the rollout")
    assert traffic.failures == []
    workload.refresh_from_db()
    assert (workload.cpu_milli, workload.memory_mb) == (1000, 512)  # the quota counts the new size
    ledger = list(UsageRecord.objects.filter(workload=workload).order_by("pk").values_list("cpu_milli", "ended_at"))
    assert [cpu for cpu, _ in ledger] == [1000, 2000] and ledger[0][1] is not None and ledger[1][1] is None
    assert workload.spec["env"] == {"VERSION": "v1"} and "resources" not in workload.spec
    # The first revision keeps the old size: a rollback goes back to it.
    assert DeploymentRevision.objects.get(workload=workload, number=1).spec["resources"]["cpu_milli"] == 500
    rolled_back = _api(bob).post(f"{base}/rollout/rollback/")
    assert rolled_back.status_code == 200, rolled_back.json()
    workload.refresh_from_db()
    assert (workload.cpu_milli, workload.memory_mb) == (500, 256)


def test_a_size_that_does_not_fit_the_quota_is_refused_and_nothing_changes(project, pool, capacity, bob, script):
    workload = _deployment(project, script, replicas=2)  # 2 × 500m: the quota of 1 CPU is full
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    before = DeploymentRevision.objects.filter(workload=workload).count()
    refused = _api(bob).post(f"{base}/revisions/", {"resources": {"cpu": 0.75}, "env": {"VERSION": "v2"}},
                             format="json")
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert "does not fit" in detail and "CPU 1.5 cores of 1 cores" in detail and "Nothing was changed" in detail
    workload.refresh_from_db()
    assert workload.cpu_milli == 500 and workload.spec["env"] == {"VERSION": "v1"}
    assert DeploymentRevision.objects.filter(workload=workload).count() == before
    assert _api(bob).get(f"{base}/rollout/").json()["stable_revision"] == 1
    # Smaller always fits; a canary cannot change the size; an empty size is no size.
    assert _api(bob).post(f"{base}/revisions/", {"resources": {"cpu": 0.25}, "strategy": "canary"},
                          format="json").status_code == 400
    assert _api(bob).post(f"{base}/revisions/", {"resources": {}}, format="json").status_code == 400
    smaller = _api(bob).post(f"{base}/revisions/", {"resources": {"cpu": 0.25}}, format="json")
    assert smaller.status_code == 201, smaller.json()
    # Rolling back to the old size is checked too: it fits again (the quota holds 2 × 500m).
    assert _api(bob).post(f"{base}/rollout/rollback/").status_code == 200


def test_surge_starts_a_new_replica_first_and_never_has_fewer_ready(
        gateway_server, project, pool, capacity, bob, script):
    capacity.nominal_cpu_milli = 1500  # the two replicas and one surge replica
    capacity.save()
    workload = _deployment(project, script, replicas=2)
    usage_open(workload=workload)  # charged as the scheduler's admission does
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    with Traffic(gateway_server, make_token(bob), workload) as traffic, Loops():
        created = _api(bob).post(f"{base}/revisions/", {"env": {"VERSION": "v2"}, "max_surge": 1}, format="json")
        assert created.status_code == 201, created.json()
        wait_for(lambda: workload.events.filter(reason="RolloutComplete").exists(), timeout=90, interval=0.2,
                 what="the rollout to complete")
        wait_for(lambda: _runs(reconcile_until(workload, S.RUNNING)) == [(2, True), (2, True)], timeout=30,
                 interval=0.2, what="two replicas of revision 2")
        # (the gateway keeps its view of the targets for up to SERVE_AUTH_CACHE_SECONDS)
        wait_for(lambda: len(traffic.answers) > 20 and set(traffic.answers[-20:]) == {"v2"}, timeout=15,
                 what="only revision 2 to answer")
    assert traffic.failures == []
    assert "v1" in traffic.answers
    # max_unavailable 0: an old replica left only once the surge one was ready next to it.
    traffic.old_replaced_only_with_more_ready_than(2, old=1)
    assert any(sum(ready for _, ready in sample.values()) == 3 for sample in traffic.samples)
    workload.refresh_from_db()
    assert workload.replicas == 2 and [p["replica"] for p in workload.placement] == [0, 1]
    reasons = list(workload.events.order_by("pk").values_list("reason", flat=True))
    assert reasons.index("SurgeAdmitted") < reasons.index("SurgeTookOver") < reasons.index("RolloutComplete")
    # The surge replicas took the old ones' places instead of being stopped at the end: the update
    # started exactly as many replicas of revision 2 as the deployment has, and they all still run.
    started = traffic.started(revision=2)
    assert len(started) == 2, started
    assert started == {r["pid"] for r in workload.runtime["replicas"]}
    # A replica that took another's number keeps its own files: its log is read from its slot.
    from apps.backends.local.backend import LocalBackend, slot_of
    from apps.backends.local.paths import replica_log_path

    moved = [r for r in workload.runtime["replicas"] if slot_of(r) != r["replica"]]
    assert moved, workload.runtime["replicas"]
    for record in moved:
        path = LocalBackend().log_path(workload, replica=record["replica"], attempt=workload.runtime["attempt"])
        assert path == replica_log_path(workload.pk, workload.runtime["attempt"], slot_of(record)) and path.is_file()
    status = _api(bob).get(f"{base}/rollout/").json()
    assert status["complete"] and status["surge"] == 0 and status["max_surge"] == 1


def test_a_surge_waits_for_quota_with_a_reason_and_the_old_replicas_keep_running(
        gateway_server, project, pool, capacity, bob, script, monkeypatch, capsys, tmp_path):
    workload = _deployment(project, script, replicas=2)  # the quota is full
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    assert _api(bob).post(f"{base}/revisions/", {"env": {"VERSION": "v2"}, "max_surge": 1},
                          format="json").status_code == 201
    scheduling_cycle()
    status = _api(bob).get(f"{base}/rollout/").json()
    assert status["surge_wanted"] == 1 and status["surge"] == 0 and not status["complete"]
    assert status["pending_reason"].startswith("The rollout's surge replica(s) wait:")
    assert "quota" in status["pending_reason"]
    monkeypatch.setenv("CAIRN_URL", gateway_server.url)
    monkeypatch.setenv("CAIRN_TOKEN", make_token(bob))
    monkeypatch.setenv("CAIRN_PROJECT", "vision")
    monkeypatch.setenv("CAIRN_CONFIG", str(tmp_path / "cli.json"))
    assert cli_main(["rollout", "status", "model"]) == 0
    shown = capsys.readouterr().out
    assert "0 of 1 surge replica(s) admitted — in progress" in shown and "surge replica(s) wait:" in shown
    for _ in range(10):  # the reconciler replaces no old replica meanwhile
        workload = reconcile_until(workload, S.RUNNING)
    assert _runs(workload) == [(1, True), (1, True)] and workload.replicas == 2
    again = _api(bob).post(f"{base}/revisions/", {"env": {"VERSION": "v3"}}, format="json")
    assert again.status_code == 409 and "in progress" in again.json()["detail"]

    capacity.nominal_cpu_milli = 1500
    capacity.save()
    with Loops():
        wait_for(lambda: workload.events.filter(reason="RolloutComplete").exists(), timeout=90, interval=0.2,
                 what="the rollout to complete")
    workload.refresh_from_db()
    assert workload.replicas == 2 and workload.pending_reason == ""


def test_a_single_replica_canary_surges_splits_traffic_and_ends_with_one_replica(
        gateway_server, project, pool, capacity, bob, script):
    capacity.nominal_cpu_milli = 500  # room for the one replica only: the canary's surge waits
    capacity.save()
    workload = _deployment(project, script, replicas=1)
    base = f"/api/v1/projects/vision/deployments/{workload.pk}"
    member = _api(bob)
    created = member.post(f"{base}/revisions/", {"env": {"VERSION": "v2"}, "strategy": "canary",
                                                 "canary_weight": 10}, format="json")
    assert created.status_code == 201, created.json()
    scheduling_cycle()
    status = member.get(f"{base}/rollout/").json()
    assert status["canary_revision"] == 2 and not status["complete"] and "quota" in status["pending_reason"]

    capacity.nominal_cpu_milli = 1000
    capacity.save()
    scheduling_cycle()
    workload = reconcile_until(workload, S.RUNNING, timeout=60, condition=lambda w: _runs(w) == [(1, True), (2, True)])
    assert workload.replicas == 2
    status = member.get(f"{base}/rollout/").json()
    assert status["complete"] and [r["surge"] for r in status["replicas"]] == [False, True]
    seen = _count(gateway_server, make_token(bob))
    assert 140 <= seen["v2"] <= 260, seen  # 10% ± 3% of 2,000

    # Promote: the stable replica is replaced while the surge one serves, then the surge is released.
    with Traffic(gateway_server, make_token(bob), workload) as traffic, Loops():
        assert member.post(f"{base}/rollout/promote/").status_code == 200
        wait_for(lambda: workload.events.filter(reason="RolloutComplete").exists(), timeout=90, interval=0.2,
                 what="the promotion to complete")
        wait_for(lambda: _runs(reconcile_until(workload, S.RUNNING)) == [(2, True)], timeout=30, interval=0.2,
                 what="one replica of revision 2")
    assert traffic.failures == []
    traffic.old_replaced_only_with_more_ready_than(1, old=1)
    workload.refresh_from_db()
    assert workload.replicas == 1
    # The canary's surge replica took the stable one's place: no other replica of revision 2 started.
    assert traffic.started(revision=2) == {workload.runtime["replicas"][0]["pid"]}

    # A second canary, rolled back: its surge replica is released at once, revision 2 serves all.
    scheduling_cycle()
    assert member.post(f"{base}/revisions/", {"env": {"VERSION": "v3"}, "strategy": "canary"},
                       format="json").status_code == 201
    scheduling_cycle()
    workload = reconcile_until(workload, S.RUNNING, timeout=60, condition=lambda w: _runs(w) == [(2, True), (3, True)])
    assert member.post(f"{base}/rollout/rollback/").status_code == 200
    workload.refresh_from_db()
    assert workload.replicas == 1 and len(workload.placement) == 1
    workload = reconcile_until(workload, S.RUNNING, condition=lambda w: _runs(w) == [(2, True)])
    time.sleep(1.1)  # the gateway's kept decision (SERVE_AUTH_CACHE_SECONDS) has expired
    assert _count(gateway_server, make_token(bob), n=100) == {"v2": 100}
