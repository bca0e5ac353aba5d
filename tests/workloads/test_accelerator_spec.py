"""`accelerator: {type, model, count}` and `arch` in the workload spec: stored, shown, and every
bad value a 400 with detail. Alice (owner) submits; bob (member) sees the fields; charlie
(outsider) gets 404."""
import pytest

from apps.workloads.models import Workload
from tests.factories import ClusterFactory, PoolFactory, QuotaFactory

URL = "/api/v1/projects/vision/training-jobs/"


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


def submit(client, **body):
    return client.post(URL, {"command": "python train.py", **body}, format="json")


def test_accelerator_is_stored_with_its_type_model_count_and_arch(client, bob, charlie, client_for):
    response = submit(client, name="npu", accelerator={"type": "ascend", "model": "910B3", "count": 8},
                      arch=["aarch64", "arm64"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["accelerator"] == {"type": "ascend", "model": "910B3", "count": 8.0}
    assert body["arch"] == ["arm64"]
    w = Workload.objects.get(pk=body["id"])
    assert (w.accelerator_type, w.gpu_model, w.gpu_milli, w.arch) == ("ascend", "910B3", 8000, "arm64")
    seen = client_for(bob).get(f"{URL}{w.pk}/").json()
    assert seen["accelerator"]["type"] == "ascend" and seen["arch"] == ["arm64"]
    assert client_for(charlie).get(f"{URL}{w.pk}/").status_code == 404


def test_the_gpu_short_form_is_nvidia(client):
    body = submit(client, name="short", resources={"gpu": 2}, gpu_model="A100", arch="amd64").json()
    assert body["accelerator"] == {"type": "nvidia", "model": "A100", "count": 2.0}
    assert body["arch"] == ["amd64"]
    cpu = submit(client, name="cpu").json()
    assert cpu["accelerator"] is None and cpu["arch"] == []


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"accelerator": {"type": "intel"}}, "accelerator", "not a valid choice"),
    ({"accelerator": {"type": "amd", "count": 0}}, "accelerator", "greater than or equal"),
    ({"accelerator": {"type": "amd", "count": 1.5}}, "accelerator", "whole number"),
    ({"accelerator": {"type": "amd", "count": 65}}, "accelerator", "less than or equal"),
    ({"accelerator": {"type": "amd", "vendor": "x"}}, "accelerator", "Unknown field"),
    ({"accelerator": "amd"}, "accelerator", ""),
    ({"arch": "sparc"}, "arch", "Unknown architecture 'sparc'"),
    ({"arch": []}, "arch", "non-empty list"),
    ({"arch": 7}, "arch", "string or a non-empty list"),
    ({"accelerator": {"type": "amd"}, "resources": {"gpu": 1}}, "accelerator", "not both"),
    ({"accelerator": {"type": "amd"}, "gpu_model": "A100"}, "accelerator", "not both"),
])
def test_bad_accelerator_or_arch_is_400_with_detail(client, body, field, words):
    response = submit(client, **body)
    assert response.status_code == 400, response.json()
    detail = response.json()["detail"]
    assert field in detail and words in detail
    assert not Workload.objects.exists()


def test_a_pool_split_by_vendor_or_arch_refuses_the_others(client, project):
    pool = PoolFactory(name="npu-arm", accelerator_types=["ascend"], architectures=["arm64"])
    QuotaFactory(project=project, pool=pool)
    refused = submit(client, pool="npu-arm", accelerator={"type": "amd"})
    assert refused.status_code == 400 and "offers Ascend accelerators, not AMD" in refused.json()["detail"]
    refused = submit(client, pool="npu-arm", accelerator={"type": "ascend"}, arch="amd64")
    assert refused.status_code == 400 and "arm64 nodes only" in refused.json()["detail"]
    assert submit(client, pool="npu-arm", accelerator={"type": "ascend"}, arch="arm64").status_code == 201


def test_a_shared_device_needs_a_sharing_plugin_on_kubernetes(client, project):
    cluster = ClusterFactory(name="k8s", backend="kubernetes")
    pool = PoolFactory(name="amd-pool", cluster=cluster)
    QuotaFactory(project=project, pool=pool)
    refused = submit(client, pool="amd-pool", accelerator={"type": "amd", "count": 0.5})
    assert refused.status_code == 400 and "no sharing plugin for AMD" in refused.json()["detail"]
    cluster.config = {"accelerators": {"amd": {"shared_resources": {"amd.com/gpu": "one"}}}}
    cluster.save()
    assert submit(client, pool="amd-pool", accelerator={"type": "amd", "count": 0.5}).status_code == 201
