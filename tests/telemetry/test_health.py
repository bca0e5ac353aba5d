"""Telemetry-driven node health: new XID errors and new uncorrectable ECC errors cordon the node
(unhealthy, not schedulable), are recorded, published on the dashboard's cluster topic, and the
scheduler places nothing new there."""
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.utils import timezone

from apps.scheduling.services import scheduling_cycle
from apps.telemetry import services as telemetry_services
from apps.telemetry.health import ECC_AGGREGATE, ECC_VOLATILE, XID_METRIC, detect_gpu_faults
from apps.telemetry.models import NodeHealthEvent, TelemetrySample
from apps.telemetry.services import telemetry_ingest_dcgm, telemetry_record
from apps.workloads.models import Workload
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory, make_token

SAMPLE = (Path(__file__).parent / "dcgm_sample.txt").read_text()  # GPU 1: XID 79 and 2 volatile DBE errors
T0 = timezone.now()


def _s(metric, value, *, node="n", gpu=0, seconds=0):
    return SimpleNamespace(node=node, gpu=gpu, metric=metric, value=float(value), time=T0 + timedelta(seconds=seconds))


# -- detection (pure) ------------------------------------------------------------------------------

def test_a_new_xid_is_a_fault_and_a_repeated_one_is_not():
    faults = detect_gpu_faults([_s(XID_METRIC, 79)], previous={}, recorded={})
    assert [(f.reason, f.gpu, f.value) for f in faults] == [("GpuXidError", 0, 79.0)]
    assert faults[0].message == "GPU 0 reported XID 79 (GPU has fallen off the bus)."
    assert detect_gpu_faults([_s(XID_METRIC, 79)], previous={("n", 0, XID_METRIC): 79.0}, recorded={}) == []
    assert detect_gpu_faults([_s(XID_METRIC, 48)], previous={("n", 0, XID_METRIC): 79.0}, recorded={}) != []
    # Within one batch too: the second sample of the same code is not new.
    faults = detect_gpu_faults([_s(XID_METRIC, 0), _s(XID_METRIC, 74, seconds=1), _s(XID_METRIC, 74, seconds=2)],
                               previous={}, recorded={})
    assert [f.value for f in faults] == [74.0]


def test_application_xids_and_zero_are_not_faults():
    samples = [_s(XID_METRIC, 0), _s(XID_METRIC, 13, gpu=1), _s(XID_METRIC, 43, gpu=2)]
    assert detect_gpu_faults(samples, previous={}, recorded={}, ignored_xids=[13, 31, 43, 45]) == []


def test_after_a_gap_an_already_recorded_fault_is_not_reported_again():
    recorded = {("n", 0, XID_METRIC): 79.0, ("n", 0, ECC_VOLATILE): 2.0}
    assert detect_gpu_faults([_s(XID_METRIC, 79), _s(ECC_VOLATILE, 2)], previous={}, recorded=recorded) == []
    assert len(detect_gpu_faults([_s(ECC_VOLATILE, 3)], previous={}, recorded=recorded)) == 1


def test_uncorrectable_ecc_counts():
    grew = detect_gpu_faults([_s(ECC_VOLATILE, 2)], previous={("n", 0, ECC_VOLATILE): 0.0}, recorded={})
    assert [(f.reason, f.previous, f.value) for f in grew] == [("GpuEccError", 0.0, 2.0)]
    assert "2 new uncorrectable ECC error(s)" in grew[0].message
    assert detect_gpu_faults([_s(ECC_VOLATILE, 2)], previous={("n", 0, ECC_VOLATILE): 2.0}, recorded={}) == []
    # A lifetime count seen for the first time is a baseline; growing later is a fault.
    assert detect_gpu_faults([_s(ECC_AGGREGATE, 5)], previous={}, recorded={}) == []
    assert len(detect_gpu_faults([_s(ECC_AGGREGATE, 6)], previous={("n", 0, ECC_AGGREGATE): 5.0}, recorded={})) == 1
    assert detect_gpu_faults([_s("gpu.ecc_sbe_volatile", 100)], previous={}, recorded={}) == []  # correctable


# -- the service -----------------------------------------------------------------------------------

@pytest.fixture
def gpu_node(project, pool):
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=2000)
    return NodeFactory(pool=pool, name="gpu-node-1", gpu_count=2, gpu_model="A100", gpu_memory_mb=81920)


@pytest.mark.django_db
def test_a_gpu_fault_cordons_the_node_and_the_scheduler_avoids_it(gpu_node, project, pool):
    healthy = SAMPLE.replace("} 79", "} 0").replace('err_code="79"', 'err_code="0"')
    healthy = healthy.replace('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1"', "#").replace("} 2\n", "} 0\n")
    telemetry_ingest_dcgm(node="gpu-node-1", text=healthy, at=timezone.now() - timedelta(seconds=10))
    assert NodeHealthEvent.objects.count() == 0
    gpu_node.refresh_from_db()
    assert gpu_node.schedulable and gpu_node.health == "healthy"

    telemetry_ingest_dcgm(node="gpu-node-1", text=SAMPLE)
    gpu_node.refresh_from_db()
    assert not gpu_node.schedulable and gpu_node.health == "unhealthy"
    events = list(NodeHealthEvent.objects.order_by("id"))
    assert [(e.node_id, e.gpu, e.reason, e.value, e.previous) for e in events] == [
        (gpu_node.pk, 1, "GpuXidError", 79.0, 0.0), (gpu_node.pk, 1, "GpuEccError", 2.0, None)]
    assert [e.cordoned for e in events] == [True, False]
    assert events[0].message == "GPU 1 reported XID 79 (GPU has fallen off the bus)."

    # The same values again are not new faults.
    telemetry_ingest_dcgm(node="gpu-node-1", text=SAMPLE, at=timezone.now() + timedelta(seconds=10))
    assert NodeHealthEvent.objects.count() == 2

    # The scheduler places nothing on the cordoned node...
    waiting = WorkloadFactory(project=project, pool=pool, gpu_milli=1000)
    scheduling_cycle()
    waiting.refresh_from_db()
    assert waiting.status == "queued"
    # ...until an administrator uncordons it.
    from apps.clusters.services import node_uncordon

    gpu_node.refresh_from_db()
    assert gpu_node.cordon_reason  # Cairn holds the cordon: a backend sync cannot lift it
    node_uncordon(node=gpu_node)
    gpu_node.refresh_from_db()
    assert gpu_node.schedulable and gpu_node.cordon_reason == "" and gpu_node.health == "healthy"
    scheduling_cycle()
    waiting.refresh_from_db()
    assert waiting.status == "admitted" and waiting.placement[0]["node"] == "gpu-node-1"
    assert Workload.objects.filter(status="running").count() == 0  # running work was never touched


@pytest.mark.django_db
def test_running_workloads_are_left_alone_and_cordon_can_be_turned_off(gpu_node, project, pool, settings):
    running = WorkloadFactory(project=project, pool=pool, status="running", gpu_milli=1000,
                              placement=[{"replica": 0, "node": "gpu-node-1", "gpus": [0]}])
    settings.CAIRN = {**settings.CAIRN, "TELEMETRY_FAULT_CORDON": False}
    telemetry_ingest_dcgm(node="gpu-node-1", text=SAMPLE)
    gpu_node.refresh_from_db()
    assert gpu_node.schedulable and NodeHealthEvent.objects.filter(cordoned=False).count() == 2
    running.refresh_from_db()
    assert running.status == "running"


@pytest.mark.django_db
def test_faults_of_unknown_nodes_are_recorded_without_a_node(db):
    telemetry_ingest_dcgm(node="not-in-inventory", text=SAMPLE)
    assert list(NodeHealthEvent.objects.order_by("id").values_list("node_id", "node_name", "reason")) == [
        (None, "not-in-inventory", "GpuXidError"), (None, "not-in-inventory", "GpuEccError")]


@pytest.mark.django_db
def test_a_failing_health_check_never_loses_samples(gpu_node, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(telemetry_services, "detect_gpu_faults", broken)
    stored = telemetry_ingest_dcgm(node="gpu-node-1", text=SAMPLE)
    assert TelemetrySample.objects.count() == len(stored) == 19
    gpu_node.refresh_from_db()
    assert gpu_node.schedulable


@pytest.mark.django_db
def test_healthy_batches_cost_no_health_queries(gpu_node, django_assert_max_num_queries):
    samples = [TelemetrySample(time=timezone.now(), node="gpu-node-1", gpu=g, metric=m, value=0.0)
               for g in (0, 1) for m in (XID_METRIC, ECC_VOLATILE, "gpu.util_percent")]
    with django_assert_max_num_queries(5) as captured:  # savepoints and the insert
        telemetry_record(samples=samples)
    assert not [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_cordon_is_published_on_the_cluster_topic(gpu_node, alice, settings):
    from channels.db import database_sync_to_async as sync_to_async
    from channels.testing.websocket import WebsocketCommunicator

    from config.asgi import application

    settings.CAIRN = {**settings.CAIRN, "TELEMETRY_PUBLISH_MIN_INTERVAL": 0}
    token = await sync_to_async(make_token)(alice)
    ws = WebsocketCommunicator(application, "/ws/projects/vision/live/",
                               headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"),
                                        (b"authorization", f"Bearer {token}".encode())])
    assert (await ws.connect())[0]
    await ws.send_json_to({"action": "subscribe", "topic": "cluster"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
    await sync_to_async(telemetry_ingest_dcgm)(node="gpu-node-1", text=SAMPLE)
    frames = []
    while not any(f["type"] == "node.changed" for f in frames) or not any(
            f["type"] == "cluster.telemetry" for f in frames):
        frames.append(await ws.receive_json_from(timeout=5))
    changed = next(f for f in frames if f["type"] == "node.changed")
    assert changed["node"]["name"] == "gpu-node-1" and changed["node"]["cordoned"] is True
    assert changed["node"]["health"] == "unhealthy" and changed["reason"] == "GpuXidError"
    assert changed["message"].startswith("GPU 1 reported XID 79") and "Node cordoned." in changed["message"]
    heat = next(f for f in frames if f["type"] == "cluster.telemetry")
    gpus = {g["gpu"]: g for n in heat["nodes"] if n["node"] == "gpu-node-1" for g in n["gpus"]}
    assert gpus[1]["xid_last"] == 79 and gpus[0]["memory_total_mb"] == 68192 + 12845
    await ws.disconnect()
