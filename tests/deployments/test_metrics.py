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
        m.finish(token, 200 if i < 90 else 503)
    long_one = m.start(workload_id=7, project="p", name="d", replica=0)
    m.finish(m.start(workload_id=7, project="p", name="d", replica=None), 504)  # answered by the gateway itself
    figures = _by_metric(m.flush())
    assert figures["serve.rps"] == pytest.approx(101 / 10)
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
