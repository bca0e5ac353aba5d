"""Manifests for each accelerator vendor: the vendor's resource name (or its sharing resources),
the model and architecture as node selection, the vendor's toleration; every object validated
against the Kubernetes JSON schemas (strict), as in test_manifests.py."""
import pytest

from apps.backends.kubernetes.manifests import ClusterOptions, workload_manifests
from apps.clusters.accelerators import vendors_for_cluster

from .test_manifests import pod_template, validate, view

HAMI_ASCEND = ClusterOptions(accelerators=vendors_for_cluster({"accelerators": {"ascend": {
    "resource": "huawei.com/Ascend910B3",
    "shared_resources": {"huawei.com/Ascend910B3": "one", "huawei.com/Ascend910B3-core": "percent"}}}}))

CASES = {
    "nvidia": (view(gpu_milli=8000, gpu_model="NVIDIA-H100-80GB-HBM3", arch=("amd64",)), ClusterOptions(),
               "nvidia.com/gpu", "8", "nvidia.com/gpu.product"),
    "amd": (view(gpu_milli=8000, accelerator_type="amd", gpu_model="AMD_Instinct_MI300X", arch=("amd64",)),
            ClusterOptions(), "amd.com/gpu", "8", "amd.com/gpu.product-name"),
    "ascend": (view(gpu_milli=8000, accelerator_type="ascend", gpu_model="910B3", arch=("arm64",)), ClusterOptions(),
               "huawei.com/Ascend910", "8", "node.kubernetes.io/npu.chip.name"),
    "ascend-hami": (view(gpu_milli=8000, accelerator_type="ascend", gpu_model="910B3", arch=("arm64",)), HAMI_ASCEND,
                    "huawei.com/Ascend910B3", "8", "node.kubernetes.io/npu.chip.name"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind", ["training", "notebook", "deployment"])
def test_each_vendor_requests_its_resource_and_selects_arch_and_model(case, kind):
    v, options, resource, count, product_label = CASES[case]
    if kind != "training":
        v = view(**{**v.__dict__, "kind": kind, "replicas": 1,
                    "spec": {"command": ["serve"], "port": 8000, "env": {}} if kind == "deployment" else {"env": {}}})
    manifests = workload_manifests(v, options)
    for m in manifests:
        validate(m)
    spec = pod_template(manifests)["spec"]
    limits = spec["containers"][0]["resources"]["limits"]
    assert limits[resource] == count
    others = {"nvidia.com/gpu", "amd.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend910B3"} - {resource}
    assert not others & set(limits)
    assert spec["nodeSelector"]["kubernetes.io/arch"] == v.arch[0]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": product_label, "operator": "In", "values": [v.gpu_model]} in terms[0]["matchExpressions"]
    assert {"key": resource, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_a_shared_npu_uses_the_vendors_sharing_resources():
    manifests = workload_manifests(view(gpu_milli=250, replicas=1, accelerator_type="ascend"), HAMI_ASCEND)
    for m in manifests:
        validate(m)
    limits = pod_template(manifests)["spec"]["containers"][0]["resources"]["limits"]
    assert limits["huawei.com/Ascend910B3"] == "1" and limits["huawei.com/Ascend910B3-core"] == "25"
    assert "nvidia.com/gpu" not in limits


def test_several_architectures_and_models_become_in_expressions():
    v = view(gpu_milli=1000, accelerator_type="nvidia", gpu_model="A100|H100", arch=("arm64", "amd64"))
    manifests = workload_manifests(v, ClusterOptions())
    for m in manifests:
        validate(m)
    spec = pod_template(manifests)["spec"]
    assert "kubernetes.io/arch" not in spec.get("nodeSelector", {})
    expressions = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]} in expressions
    assert {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100", "H100"]} in expressions


def test_cpu_only_work_on_arm_gets_only_the_arch_selector():
    spec = pod_template(workload_manifests(view(gpu_milli=0, replicas=1, arch=("arm64",)), ClusterOptions()))["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/arch": "arm64"}
    assert "tolerations" not in spec and "affinity" not in spec
