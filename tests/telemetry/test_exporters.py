"""Per-vendor exporter parsers behind one interface: each vendor's recorded sample (written from
the documented metric names: DCGM exporter, AMD device-metrics exporter, Ascend npu-exporter;
same device values in all three) gives the same telemetry series, and faults from any vendor
cordon the node the same way."""
from pathlib import Path

import pytest

from apps.clusters.models import Node
from apps.scheduling.services import scheduling_cycle
from apps.telemetry.exporters import parse_exporter
from apps.telemetry.models import NodeHealthEvent, TelemetrySample
from apps.telemetry.services import telemetry_ingest_exporter
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

HERE = Path(__file__).parent
SAMPLES = {
    "nvidia": (HERE / "dcgm_sample.txt").read_text(),
    "amd": (HERE / "samples" / "amd_device_metrics.txt").read_text(),
    "ascend": (HERE / "samples" / "ascend_npu_exporter.txt").read_text(),
}
COMMON = ("gpu.util_percent", "gpu.memory_used_mb", "gpu.memory_free_mb", "gpu.temperature_c", "gpu.power_w")


def series(vendor):
    return {(s.gpu, s.metric): s.value for s in parse_exporter(vendor, SAMPLES[vendor], node="n")
            if s.metric in COMMON}


def test_each_vendors_sample_gives_the_same_series():
    nvidia = series("nvidia")
    assert nvidia[(0, "gpu.util_percent")] == 97 and nvidia[(1, "gpu.memory_free_mb")] == 81037
    assert len(nvidia) == 10
    assert series("amd") == nvidia
    assert series("ascend") == nvidia


def test_the_pod_of_each_device_is_read_from_each_vendors_labels():
    for vendor in SAMPLES:
        pods = {(s.gpu, s.labels["pod"]) for s in parse_exporter(vendor, SAMPLES[vendor], node="n")
                if s.labels.get("pod")}
        assert pods == {(0, "cairn-12-1-0-b7k2p")}, vendor


def test_amd_mi2xx_names_and_the_prefix_are_read_too():
    text = ('amd_gpu_edge_temperature{gpu_id="3"} 55\namd_gpu_average_package_power{gpu_id="3"} 200\n'
            'amd_gpu_gfx_activity{gpu_id="3"} 12\n')
    got = {s.metric: s.value for s in parse_exporter("amd", text, node="n")}
    assert got == {"gpu.temperature_c": 55.0, "gpu.power_w": 200.0, "gpu.util_percent": 12.0}


def test_unknown_vendor_or_text_is_a_value_error():
    with pytest.raises(ValueError):
        parse_exporter("intel", "", node="n")
    with pytest.raises(ValueError):
        parse_exporter("ascend", "npu_chip_info_power{id=0 12", node="n")


@pytest.fixture
def three_nodes(project, pool):
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=6000)
    return {
        "nvidia": NodeFactory(pool=pool, name="nv", gpu_count=2, gpu_model="A100", accelerator_type="nvidia"),
        "amd": NodeFactory(pool=pool, name="mi", gpu_count=2, gpu_model="MI300X", accelerator_type="amd"),
        "ascend": NodeFactory(pool=pool, name="npu", gpu_count=2, gpu_model="910B3", accelerator_type="ascend"),
    }


@pytest.mark.django_db
def test_faults_from_any_vendor_cordon_the_node_the_same_way(three_nodes, project, pool):
    for vendor, node in three_nodes.items():
        telemetry_ingest_exporter(node=node.name, text=SAMPLES[vendor], vendor=vendor)
    for vendor, node in three_nodes.items():
        node.refresh_from_db()
        assert (node.schedulable, node.health) == (False, "unhealthy"), vendor
        assert node.cordon_reason
        events = NodeHealthEvent.objects.filter(node=node)
        assert events.filter(gpu=1, cordoned=True).count() == 1 and not events.filter(gpu=0).exists()
    reasons = {v: set(NodeHealthEvent.objects.filter(node=n).values_list("reason", flat=True))
               for v, n in three_nodes.items()}
    assert reasons == {"nvidia": {"GpuXidError", "GpuEccError"}, "amd": {"GpuEccError", "GpuUnhealthy"},
                       "ascend": {"GpuUnhealthy", "GpuErrorCode"}}
    assert NodeHealthEvent.objects.get(node=three_nodes["ascend"], reason="GpuErrorCode").message == (
        "Device 1 reported error code 2164260865 (0x81000001).")
    # Stored series are the same names for all three.
    names = {v: set(TelemetrySample.objects.filter(node=n.name, metric__in=COMMON).values_list("metric", flat=True))
             for v, n in three_nodes.items()}
    assert names["nvidia"] == names["amd"] == names["ascend"] == set(COMMON)
    # And the scheduler places nothing new on any of them.
    waiting = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, accelerator_type="amd")
    scheduling_cycle()
    waiting.refresh_from_db()
    assert waiting.status == "queued"
    assert Node.objects.filter(schedulable=True).count() == 0
