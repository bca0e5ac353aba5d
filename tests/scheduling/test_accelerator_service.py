"""The scheduling service on a mixed cluster (real PostgreSQL): nodes' vendor and architecture and
workloads' accelerator and arch reach the policy, placements respect them, and the pending reason
stored on the workload names the type that is missing."""
import pytest

from apps.scheduling.services import scheduling_cycle
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory


@pytest.fixture
def mixed(project, pool):
    big = {"cpu_milli_allocatable": 192000, "memory_mb_allocatable": 1024 * 1024}
    NodeFactory(pool=pool, name="h100", gpu_count=8, gpu_model="H100", accelerator_type="nvidia", cpu_arch="amd64", **big)
    NodeFactory(pool=pool, name="npu", gpu_count=8, gpu_model="910B", accelerator_type="ascend", cpu_arch="arm64", **big)
    NodeFactory(pool=pool, name="arm-cpu", cpu_arch="arm64", **big)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=64000, nominal_cpu_milli=10**6,
                 nominal_memory_mb=10**7)
    return project, pool


def test_each_workload_lands_on_its_type_and_arch(mixed):
    project, pool = mixed
    npu = WorkloadFactory(project=project, pool=pool, gpu_milli=8000, accelerator_type="ascend", gpu_model="910B")
    gpu = WorkloadFactory(project=project, pool=pool, gpu_milli=2000)  # the NVIDIA short form
    arm = WorkloadFactory(project=project, pool=pool, arch="arm64", cpu_milli=150000)
    waiting = WorkloadFactory(project=project, pool=pool, gpu_milli=8000, accelerator_type="ascend", gpu_model="910B",
                              priority=5)
    scheduling_cycle()
    for w in (npu, gpu, arm, waiting):
        w.refresh_from_db()
    assert npu.status == "admitted" and npu.placement[0]["node"] == "npu"
    assert gpu.placement[0]["node"] == "h100"
    assert arm.placement[0]["node"] in ("npu", "arm-cpu")
    # The Ascend node is taken (with no known end, so no reservation): it waits on capacity.
    assert waiting.status == "queued" and waiting.waiting_on == "capacity"
    assert waiting.pending_reason.startswith(f"capacity: waiting for 8 Ascend 910B on one node; pool '{pool.name}' "
                                             "cannot fit 1 replica(s) of 8 NPU,")


def test_a_type_the_pool_lacks_waits_on_a_constraint_that_names_it(mixed):
    project, pool = mixed
    amd = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, accelerator_type="amd")
    x86_npu = WorkloadFactory(project=project, pool=pool, gpu_milli=1000, accelerator_type="ascend", arch="amd64")
    scheduling_cycle()
    amd.refresh_from_db()
    x86_npu.refresh_from_db()
    assert amd.waiting_on == "constraint"
    assert amd.pending_reason == f"constraint: pool '{pool.name}' has no schedulable node with AMD GPUs"
    assert x86_npu.pending_reason == f"constraint: pool '{pool.name}' has no schedulable node with Ascend NPUs on amd64"
