"""Node inventory of mixed clusters: NVIDIA, AMD and Ascend devices, amd64 and arm64 nodes, read
from allocatable resources and node labels, through the real client against the emulated API
server (no real cluster is reachable here)."""
from apps.backends.kubernetes.status import node_inventory
from apps.clusters.accelerators import vendors_for_cluster
from apps.clusters.models import Node

from .test_reconciler import until


def k8s_node(name, *, labels, allocatable, arch="amd64"):
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/arch": arch, **labels}},
        "spec": {},
        "status": {"capacity": {"cpu": "192", "memory": "1500Gi", **allocatable},
                   "allocatable": {"cpu": "190", "memory": "1400Gi", **allocatable},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


AMD = k8s_node("mi300-1", labels={"amd.com/gpu.product-name": "AMD_Instinct_MI300X", "amd.com/gpu.vram": "192G"},
               allocatable={"amd.com/gpu": "8"})
ASCEND = k8s_node("npu-1", arch="arm64", labels={"node.kubernetes.io/npu.chip.name": "910B3",
                                                  "accelerator": "huawei-Ascend910"},
                  allocatable={"huawei.com/Ascend910": "8"})
HAMI_ASCEND = k8s_node("npu-2", arch="arm64", labels={},
                       allocatable={"huawei.com/Ascend910B3": "8", "huawei.com/Ascend910B3-memory": "524288"})
CPU_ARM = k8s_node("graviton-1", arch="arm64", labels={}, allocatable={})


def inventory(node, config=None):
    vendors = vendors_for_cluster(config or {})
    return node_inventory(node, gpu_resource="nvidia.com/gpu", gpu_product_label="nvidia.com/gpu.product",
                          vendors=vendors)


def test_each_vendor_is_read_from_its_resource_and_labels():
    amd = inventory(AMD)
    assert (amd["accelerator_type"], amd["gpu_count"], amd["gpu_model"], amd["cpu_arch"]) == (
        "amd", 8, "AMD_Instinct_MI300X", "amd64")
    assert amd["gpu_memory_mb"] == 192 * 1000**3 // 1024**2
    npu = inventory(ASCEND)
    assert (npu["accelerator_type"], npu["gpu_count"], npu["gpu_model"], npu["cpu_arch"]) == (
        "ascend", 8, "910B3", "arm64")
    cpu = inventory(CPU_ARM)
    assert (cpu["accelerator_type"], cpu["gpu_count"], cpu["cpu_arch"]) == ("none", 0, "arm64")


def test_hami_model_specific_ascend_resource_is_counted_and_names_the_model():
    fields = inventory(HAMI_ASCEND)
    assert (fields["accelerator_type"], fields["gpu_count"], fields["gpu_model"]) == ("ascend", 8, "Ascend910B3")


def test_a_cluster_can_rename_a_vendors_resource():
    renamed = k8s_node("x", labels={"acme/amd-model": "MI250"}, allocatable={"acme.io/amdgpu": "4"})
    assert inventory(renamed)["gpu_count"] == 0
    fields = inventory(renamed, {"accelerators": {"amd": {"resource": "acme.io/amdgpu",
                                                          "product_label": "acme/amd-model"}}})
    assert (fields["accelerator_type"], fields["gpu_count"], fields["gpu_model"]) == ("amd", 4, "MI250")


def test_architecture_falls_back_to_node_info_and_normalises():
    node = k8s_node("y", labels={}, allocatable={}, arch="arm64")
    del node["metadata"]["labels"]["kubernetes.io/arch"]
    node["status"]["nodeInfo"] = {"architecture": "aarch64"}
    assert inventory(node)["cpu_arch"] == "arm64"


def test_the_reconciler_records_vendor_and_arch_of_each_node(reconciler, kubelet, k8s_pool):
    kubelet.add_node("h100-1", gpus=8, labels={"kubernetes.io/arch": "amd64"})
    for obj in (AMD, ASCEND, CPU_ARM):
        kubelet.core.create_node(obj)
    assert until(reconciler, lambda: Node.objects.filter(cluster=k8s_pool.cluster).count() == 4)
    rows = {n.name: (n.accelerator_type, n.cpu_arch, n.gpu_count, n.gpu_model)
            for n in Node.objects.filter(cluster=k8s_pool.cluster)}
    assert rows == {
        "h100-1": ("nvidia", "amd64", 8, "NVIDIA-H100-80GB-HBM3"),
        "mi300-1": ("amd", "amd64", 8, "AMD_Instinct_MI300X"),
        "npu-1": ("ascend", "arm64", 8, "910B3"),
        "graviton-1": ("none", "arm64", 0, ""),
    }
