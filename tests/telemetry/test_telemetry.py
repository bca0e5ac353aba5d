"""Telemetry: DCGM exporter text -> per-GPU samples, scrapes over HTTP, the local sampler,
retention with rollups, per-node and per-workload queries, live publication and /metrics."""
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.utils import timezone

from apps.telemetry.dcgm import parse_dcgm
from apps.telemetry.models import TelemetryRollup, TelemetrySample
from apps.telemetry.services import (
    local_samples,
    telemetry_compact,
    telemetry_ingest_dcgm,
    telemetry_record,
    telemetry_scrape,
    workload_from_pod,
)
from tests.factories import WorkloadFactory, make_token

SAMPLE = (Path(__file__).parent / "dcgm_sample.txt").read_text()


def test_dcgm_text_is_parsed_into_per_gpu_samples():
    samples = parse_dcgm(SAMPLE, node="gpu-node-1")
    by = {(s.gpu, s.metric): s for s in samples}
    assert {s.node for s in samples} == {"gpu-node-1"}
    assert {s.gpu for s in samples} == {0, 1}
    assert by[(0, "gpu.util_percent")].value == 97 and by[(1, "gpu.util_percent")].value == 0
    assert by[(0, "gpu.memory_used_mb")].value == 68192 and by[(1, "gpu.memory_free_mb")].value == 81037
    assert by[(0, "gpu.temperature_c")].value == 67 and by[(1, "gpu.temperature_c")].value == 34
    assert by[(0, "gpu.power_w")].value == pytest.approx(312.456)
    assert by[(0, "gpu.ecc_sbe_volatile")].value == 3 and by[(1, "gpu.ecc_dbe_volatile")].value == 2
    assert by[(1, "gpu.xid_last")].value == 79 and by[(0, "gpu.pcie_replays")].value == 0
    assert by[(0, "gpu.util_percent")].labels == {
        "uuid": "GPU-5e9c1f7a-0d3b-4c8e-9a51-2f6b7c8d9e01", "model": "NVIDIA A100-SXM4-80GB",
        "namespace": "cairn-vision", "pod": "cairn-12-1-0-b7k2p", "container": "trainer"}
    assert "pod" not in by[(1, "gpu.util_percent")].labels
    assert len(samples) == 2 * 9 + 1


def test_garbage_is_refused_and_unknown_fields_skipped():
    with pytest.raises(ValueError):
        parse_dcgm("this is { not prometheus", node="n")
    assert parse_dcgm('OTHER_METRIC{gpu="0"} 1\nDCGM_FI_DEV_GPU_UTIL{UUID="x"} 5\n', node="n") == []


def test_pod_names_map_to_workloads():
    assert workload_from_pod("cairn-12-1-0-b7k2p") == 12
    assert workload_from_pod("cairn-7") == 7
    assert workload_from_pod("someone-else-3") is None and workload_from_pod(None) is None


@pytest.mark.django_db
def test_dcgm_ingest_attributes_samples_to_workloads(project, pool):
    WorkloadFactory(project=project, pool=pool, id=12)
    stored = telemetry_ingest_dcgm(node="gpu-node-1", text=SAMPLE)
    assert len(stored) == 19
    assert TelemetrySample.objects.filter(workload_id=12, gpu=0).count() == 9  # the samples that name its pod
    assert TelemetrySample.objects.filter(workload__isnull=True).count() == 10


@pytest.mark.django_db
def test_scrape_over_http_and_unreachable_exporter():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            body = SAMPLE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
        assert len(telemetry_scrape(node="gpu-node-2", url=url)) == 19
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert telemetry_scrape(node="gpu-node-2", url=url) == []  # refused: logged, not raised
    assert TelemetrySample.objects.filter(node="gpu-node-2").count() == 19


def test_local_sampler_reads_host_and_gpus():
    fake_psutil = SimpleNamespace(cpu_percent=lambda interval=None: 12.5,
                                  virtual_memory=lambda: SimpleNamespace(percent=40.0, used=2**31))

    class Nvml:
        NVML_TEMPERATURE_GPU = 0

        def nvmlDeviceGetCount(self):  # noqa: N802
            return 2

        def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
            return i

        def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
            return SimpleNamespace(gpu=50 + h)

        def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
            return SimpleNamespace(used=2**30, total=2**34)

        def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
            return 60

        def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
            raise RuntimeError("not supported")

    samples = local_samples(node="box", psutil=fake_psutil, nvml=Nvml())
    got = {(s.gpu, s.metric): s.value for s in samples}
    assert got[(None, "node.cpu_percent")] == 12.5 and got[(None, "node.memory_used_mb")] == 2048
    assert got[(1, "gpu.util_percent")] == 51 and got[(0, "gpu.memory_used_mb")] == 1024
    assert (0, "gpu.power_w") not in got


def _samples(node, metric, start, count, step_seconds, value=lambda i: float(i), gpu=0, workload_id=None):
    return [TelemetrySample(time=start + timedelta(seconds=i * step_seconds), node=node, gpu=gpu, metric=metric,
                            value=value(i), workload_id=workload_id) for i in range(count)]


@pytest.mark.django_db
def test_retention_rolls_raw_into_minutes_then_hours_and_keeps_extremes(settings):
    settings.CAIRN = {**settings.CAIRN, "TELEMETRY_RAW_RETENTION_HOURS": 1, "TELEMETRY_MINUTE_RETENTION_DAYS": 1,
                      "TELEMETRY_HOUR_RETENTION_DAYS": 3}
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    old = now - timedelta(hours=2, minutes=30)
    # 10 minutes of 1-second samples two and a half hours ago, with one spike.
    telemetry_record(samples=_samples("n1", "gpu.util_percent", old, 600, 1, value=lambda i: 999.0 if i == 123 else 50.0))
    telemetry_record(samples=_samples("n1", "gpu.util_percent", now - timedelta(minutes=5), 10, 1))  # recent
    done = telemetry_compact(now=now)
    assert done["raw_deleted"] == 600 and done["minute_rollups"] == 10
    assert TelemetrySample.objects.count() == 10
    minutes = TelemetryRollup.objects.filter(resolution=60)
    assert sum(r.count for r in minutes) == 600 and max(r.max for r in minutes) == 999.0
    assert telemetry_compact(now=now)["raw_deleted"] == 0  # idempotent
    later = now + timedelta(days=1, hours=2)
    done = telemetry_compact(now=later)
    hours = TelemetryRollup.objects.filter(resolution=3600)
    assert done["minute_deleted"] >= 10 and hours.count() >= 1
    assert sum(r.count for r in hours) == 610 and max(r.max for r in hours) == 999.0
    assert sum(r.sum for r in hours) == pytest.approx(599 * 50.0 + 999.0 + sum(range(10)))
    telemetry_compact(now=now + timedelta(days=5))
    assert TelemetryRollup.objects.count() == 0


@pytest.mark.django_db
def test_node_query_and_workload_query(project, pool, alice, charlie, client_for):
    workload = WorkloadFactory(project=project, pool=pool)
    start = timezone.now() - timedelta(minutes=10)
    telemetry_record(samples=_samples("n1", "gpu.util_percent", start, 300, 1, gpu=0, workload_id=workload.pk)
                     + _samples("n1", "gpu.util_percent", start, 300, 1, gpu=1, value=lambda i: 5.0))
    client = client_for(alice)
    since = start.isoformat()
    body = client.get("/api/v1/telemetry/nodes/n1/", {"metric": "gpu.util_percent", "since": since,
                                                     "max_points": 10}).json()
    series = {line["gpu"]: line["points"] for line in body["series"]}
    assert set(series) == {0, 1} and all(len(points) <= 11 for points in series.values())
    assert max(p[3] for p in series[0]) == 299.0 and min(p[2] for p in series[0]) == 0.0
    assert client.get("/api/v1/telemetry/nodes/n1/").json() == {"metrics": ["gpu.util_percent"]}
    url = f"/api/v1/projects/{project.slug}/workload-telemetry/{workload.pk}/"
    body = client.get(url, {"metric": "gpu.util_percent", "since": since}).json()
    assert [line["gpu"] for line in body["series"]] == [0]
    assert client_for(charlie).get(url).status_code == 404
    assert client_for().get("/api/v1/telemetry/nodes/n1/").status_code == 401
    bad = client.get("/api/v1/telemetry/nodes/n1/", {"metric": "gpu.util_percent", "max_points": 0})
    assert bad.status_code == 400 and bad.json()["detail"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_workload_samples_are_published_to_the_project(vera, project, pool):
    from channels.db import database_sync_to_async as sync_to_async
    from channels.testing.websocket import WebsocketCommunicator

    from config.asgi import application

    token = await sync_to_async(make_token)(vera, scopes=["read"])
    workload = await sync_to_async(WorkloadFactory)(project=project, pool=pool)
    ws = WebsocketCommunicator(application, "/ws/projects/vision/events/",
                               headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"),
                                        (b"authorization", f"Bearer {token}".encode())])
    assert (await ws.connect())[0]
    await sync_to_async(telemetry_record)(samples=_samples("n1", "gpu.util_percent", timezone.now(), 1, 1,
                                                           workload_id=workload.pk))
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "telemetry.samples" and frame["samples"][0]["workload"] == workload.pk
    await ws.disconnect()


@pytest.mark.django_db
def test_metrics_endpoint_is_protected(alice, admin_user, client_for, settings, project, pool):
    WorkloadFactory(project=project, pool=pool, status="running")
    assert client_for().get("/metrics").status_code == 401
    denied = client_for(alice).get("/metrics")
    assert denied.status_code == 403 and "administrators" in denied.json()["detail"]
    response = client_for(admin_user).get("/metrics")
    assert response.status_code == 200
    assert 'cairn_workloads{kind="training",status="running"} 1.0' in response.content.decode()
    settings.CAIRN = {**settings.CAIRN, "METRICS_TOKEN": "scrape-me"}
    assert client_for().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").status_code == 200
    assert client_for().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    settings.CAIRN = {**settings.CAIRN, "METRICS_ALLOWED_NETWORKS": ["127.0.0.0/8"]}
    assert client_for().get("/metrics").status_code == 200  # the test client comes from 127.0.0.1


@pytest.mark.django_db
def test_metrics_count_queued_work_and_its_gpus_by_what_it_waits_on(admin_user, client_for, project, pool):
    for gpus, replicas, waiting_on in ((1000, 2, "quota_lendable"), (500, 1, "quota_lendable"), (8000, 1, "capacity")):
        WorkloadFactory(project=project, pool=pool, status="queued", gpu_milli=gpus, replicas=replicas,
                        waiting_on=waiting_on)
    WorkloadFactory(project=project, pool=pool, status="running", gpu_milli=4000)  # not queued: not counted
    text = client_for(admin_user).get("/metrics").content.decode()
    labels = f'pool="{pool.name}",project="{project.slug}"'
    assert f'cairn_queued_workloads{{{labels},waiting_on="quota_lendable"}} 2.0' in text
    assert f'cairn_queued_gpus{{{labels},waiting_on="quota_lendable"}} 2.5' in text
    assert f'cairn_queued_gpus{{{labels},waiting_on="capacity"}} 8.0' in text
    assert "4.0" not in "".join(line for line in text.splitlines() if line.startswith("cairn_queued_gpus"))


@pytest.mark.django_db
def test_run_telemetry_once_samples_the_local_node():
    from django.core.management import call_command

    from apps.clusters.services import local_cluster_register

    node = local_cluster_register()
    call_command("run_telemetry", "--once")
    metrics = set(TelemetrySample.objects.filter(node=node.name).values_list("metric", flat=True))
    assert {"node.cpu_percent", "node.memory_percent", "node.memory_used_mb"} <= metrics


def test_one_sampling_pass_gives_the_local_node_cpu_and_memory(db, alice, client_for):
    """The pass `run_embedded` runs in a thread (and `run_telemetry` in its loop) samples this
    machine under the local node's name: its telemetry lists CPU and memory (issue 29, item 3)."""
    from apps.clusters.services import local_cluster_register
    from apps.telemetry.loops import TelemetryPass

    node = local_cluster_register()
    TelemetryPass()()
    client = client_for(alice)
    metrics = client.get(f"/api/v1/telemetry/nodes/{node.name}/").json()["metrics"]
    assert {"node.cpu_percent", "node.memory_percent", "node.memory_used_mb"} <= set(metrics)
    series = client.get(f"/api/v1/telemetry/nodes/{node.name}/", {"metric": "node.memory_percent"}).json()
    [line] = series["series"]
    assert 0 < line["points"][-1][1] <= 100
    overview = client.get("/api/v1/cluster/overview/").json()
    [row] = [n for pool in overview["pools"] for n in pool["nodes"] if n["name"] == node.name]
    assert row["cpu_percent"] is not None and row["memory_percent"] is not None
    [pool] = [p for p in overview["pools"] if p["name"] == node.pool.name]
    assert pool["cpu_milli_allocatable"] == node.cpu_milli_allocatable
    assert pool["memory_mb_allocatable"] == node.memory_mb_allocatable and pool["allocated_cpu_milli"] == 0
