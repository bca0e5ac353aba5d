"""Request metrics: the window arithmetic (pure, with a fake clock), and end to end: requests
through the gateway become telemetry samples of the deployment (per deployment and per replica),
published live on its topic, and Prometheus series at /metrics."""
import time

import httpx
import pytest

from apps.deployments.metrics import ServeMetrics
from apps.telemetry.models import TelemetrySample
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import reconcile_until, wait_for
from tests.deployments.test_serving import _bearer, _deploy, _ready_count, _url
from tests.factories import make_token

S = WorkloadStatus


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _by_metric(samples):
    return {s.metric: s.value for s in samples}


def test_window_rates_concurrency_quantiles_and_status_classes():
    clock = Clock()
    m = ServeMetrics(clock=clock)
    tokens = []
    for i in range(100):  # 100 requests over 10 s, each 10 ms .. 1 s, to replicas 0 and 1
        token = m.start(workload_id=7, project="p", name="d", replica=None)
        m.assign(token, i % 2)
        tokens.append(token)
        clock.now += 0.1
        m.replied(token)  # the replica answered: its own 503s count as its traffic
        m.finish(token, 200 if i < 90 else 503)
    long_one = m.start(workload_id=7, project="p", name="d", replica=0)
    m.finish(m.start(workload_id=7, project="p", name="d", replica=None), 503)  # answered by the gateway itself
    figures = _by_metric(m.flush())
    assert figures["serve.rps"] == pytest.approx(100 / 10) and figures["serve.gateway_rps"] == pytest.approx(0.1)
    assert figures["serve.s2xx"] == pytest.approx(9.0) and figures["serve.s5xx"] == pytest.approx(1.1)
    assert figures["serve.rps.r0"] == pytest.approx(5.0) and figures["serve.rps.r1"] == pytest.approx(5.0)
    assert figures["serve.concurrency"] == pytest.approx(1.0)  # one request in flight at every moment
    assert figures["serve.in_flight"] == 1 and figures["serve.in_flight.r0"] == 1
    assert figures["serve.p50_ms"] == pytest.approx(100.0) and figures["serve.p99_ms"] == pytest.approx(100.0)
    clock.now += 5  # the long request stays in flight through the next window
    figures = _by_metric(m.flush())
    assert figures["serve.concurrency"] == pytest.approx(1.0) and figures["serve.rps"] == 0
    assert "serve.p50_ms" not in figures
    clock.now += 5
    m.finish(long_one, 200)
    figures = _by_metric(m.flush())
    assert figures["serve.p50_ms"] == pytest.approx(10_000.0)


def test_the_gateways_own_503s_are_not_a_replicas_traffic():
    """Issue 46, item 7: curl's retry loop against a deployment with no ready replica, or whose
    replicas all refuse the connection, gets the gateway's 503s: not requests a replica served."""
    clock = Clock()
    m = ServeMetrics(clock=clock)
    for _ in range(20):  # no replica ready: answered at once
        m.finish(m.start(workload_id=7, project="p", name="d", replica=None), 503)
    for _ in range(10):  # tried replica 0, which refused the connection
        token = m.start(workload_id=7, project="p", name="d", replica=None)
        m.assign(token, 0)
        m.finish(token, 503)
    clock.now += 10
    figures = _by_metric(m.flush())
    assert figures["serve.rps"] == 0 and figures.get("serve.rps.r0", 0) == 0
    assert "serve.p50_ms" not in figures  # no latency of requests no replica took
    assert figures["serve.gateway_rps"] == pytest.approx(3.0) and figures["serve.s5xx"] == pytest.approx(3.0)


def test_rates_fall_to_zero_when_traffic_stops():
    """Five minutes after a single request the chart's latest rate must be 0, not the last
    window's: the first window without traffic gives its zeros."""
    clock = Clock()
    m = ServeMetrics(clock=clock)
    token = m.start(workload_id=7, project="p", name="d", replica=0)
    m.replied(token)
    m.finish(token, 200)
    clock.now += 1
    assert _by_metric(m.flush())["serve.rps.r0"] == pytest.approx(1.0)
    clock.now += 1
    figures = _by_metric(m.flush())
    assert figures["serve.rps"] == 0 and figures["serve.rps.r0"] == 0 and figures["serve.s2xx"] == 0
    assert figures["serve.concurrency"] == 0 and figures["serve.in_flight.r0"] == 0
    clock.now += 1
    assert m.flush() == []  # then nothing more until traffic comes back


@pytest.mark.django_db(transaction=True)
def test_gateway_503s_are_stored_apart_and_the_rate_drops_to_zero(settings, project, bob):
    """Through the real gateway: a deployment with no running replica answers 503; the stored
    samples say the gateway answered them (serve.gateway_rps), no replica served anything, and
    once the requests stop the stored rate is 0."""
    settings.CAIRN = {**settings.CAIRN, "SERVE_METRICS_INTERVAL_SECONDS": 0.3}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    from tests.backends.helpers import admitted
    from tests.deployments.conftest import LiveServer

    workload = admitted(kind="deployment", project=project, name="model", spec={"command": ["true"], "env": {}})
    server = LiveServer()
    try:
        with httpx.Client(headers=_bearer(make_token(bob))) as client:
            for _ in range(10):
                assert client.get(_url(server)).status_code == 503
        samples = TelemetrySample.objects.filter(workload=workload)
        wait_for(lambda: samples.filter(metric="serve.gateway_rps", value__gt=0).exists(), timeout=10,
                 what="the gateway's answers stored")
        wait_for(lambda: samples.filter(metric="serve.gateway_rps", value=0).exists(), timeout=10,
                 what="the rate back at 0")
        assert not samples.filter(metric="serve.rps", value__gt=0).exists()
        assert not samples.filter(metric__startswith="serve.rps.r").exists()
        latest = samples.filter(metric="serve.gateway_rps").order_by("-time").first()
        assert latest.value == 0
    finally:
        server.stop()


@pytest.mark.django_db(transaction=True)
def test_requests_through_the_gateway_become_samples_and_prometheus_series(
        settings, project, bob, admin_user, script, shared_dir):
    settings.CAIRN = {**settings.CAIRN, "SERVE_METRICS_INTERVAL_SECONDS": 0.5}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    from tests.deployments.conftest import LiveServer

    server = LiveServer()
    try:
        workload = _deploy(project, script, shared_dir, replicas=2, gates=[0, 1])
        reconcile_until(workload, S.RUNNING, condition=lambda w: _ready_count(w) == 2)
        with httpx.Client(headers=_bearer(make_token(bob))) as client:
            for _ in range(40):
                assert client.get(_url(server)).status_code == 200
        wait_for(lambda: TelemetrySample.objects.filter(workload=workload, metric="serve.rps", value__gt=0).exists(),
                 timeout=10, what="request metrics stored")
        names = set(TelemetrySample.objects.filter(workload=workload).values_list("metric", flat=True))
        assert {"serve.rps", "serve.concurrency", "serve.p50_ms", "serve.p95_ms", "serve.p99_ms", "serve.s2xx",
                "serve.rps.r0", "serve.rps.r1", "serve.p99_ms.r1"} <= names
        time.sleep(0.6)
        total = sum(TelemetrySample.objects.filter(workload=workload, metric="serve.s2xx").values_list(
            "value", flat=True))
        assert total > 0
    finally:
        server.stop()
    from django.test import Client

    scrape = Client()
    scrape.force_login(admin_user)
    text = scrape.get("/metrics").content.decode()
    assert 'cairn_deployment_requests_total{code="2xx",deployment="model",project="vision",replica="0"}' in text
    assert "cairn_deployment_request_duration_seconds_bucket" in text
