"""Work that can never run (issue 46, item 3): a replica larger than every node of its pool is
refused at submission with a 400 naming the largest node; queued work whose pool shrank after
submission waits with "no node of this pool can ever run it" (waiting_on never_fits), not a
quota or capacity reason that tells it to wait for running work to end."""
import pytest

from apps.clusters.models import Node
from apps.scheduling.policy import largest_node_refusal
from apps.scheduling.services import scheduling_cycle
from apps.workloads.models import Workload
from tests.factories import NodeFactory, QuotaFactory

JOBS = "/api/v1/projects/vision/training-jobs/"


@pytest.fixture
def two_core_pool(project, pool):
    NodeFactory(pool=pool, name="small", cpu_milli_allocatable=2000, memory_mb_allocatable=8192)
    NodeFactory(pool=pool, name="tiny", cpu_milli_allocatable=1000, memory_mb_allocatable=4096)
    # A quota smaller than the ask too: the reason must not send the user to an admin for quota.
    QuotaFactory(project=project, pool=pool, nominal_cpu_milli=1000, nominal_memory_mb=4096)
    return pool


def _job(**resources):
    return {"name": "big", "command": "true", "resources": resources}


def test_a_replica_larger_than_the_largest_node_is_refused_naming_it(two_core_pool, bob, client_for):
    answer = client_for(bob).post(JOBS, _job(cpu=8, memory="1Gi"), format="json")
    assert answer.status_code == 400, answer.content
    detail = answer.json()["detail"]
    assert "can ever run it" in detail and "8 CPU" in detail
    assert "'small', has 2 CPU, 8 GiB of memory and 0 GPU allocatable" in detail
    assert not Workload.objects.exists()

    answer = client_for(bob).post(JOBS, _job(cpu=1, memory="16Gi"), format="json")
    assert answer.status_code == 400 and "16 GiB of memory" in answer.json()["detail"]
    answer = client_for(bob).post(JOBS, _job(cpu=1, gpu=1), format="json")
    assert answer.status_code == 400 and "1 GPU" in answer.json()["detail"]


def test_a_sweep_with_a_template_that_can_never_fit_is_refused(two_core_pool, bob, client_for):
    answer = client_for(bob).post("/api/v1/projects/vision/sweeps/", {
        "name": "s", "template": {"command": "true", "resources": {"cpu": 8}}, "space": {"lr": {"type": "float", "low": 0.1, "high": 1.0}},
        "objective": {"metric": "loss", "direction": "minimize"}, "budget": {"max_trials": 2},
    }, format="json")
    assert answer.status_code == 400 and "can ever run it" in answer.json()["detail"]


def test_what_fits_some_node_is_accepted_and_a_pool_without_nodes_decides_nothing(project, pool, bob, client_for):
    QuotaFactory(project=project, pool=pool)
    assert client_for(bob).post(JOBS, _job(cpu=64), format="json").status_code == 201  # no node yet
    NodeFactory(pool=pool, name="small", cpu_milli_allocatable=2000, memory_mb_allocatable=8192, schedulable=False)
    answer = client_for(bob).post(JOBS, {**_job(cpu=2, memory="8Gi"), "name": "fits"}, format="json")
    assert answer.status_code == 201  # a cordon passes; the node's size decides


def test_queued_work_whose_pool_shrank_waits_saying_it_can_never_run(two_core_pool, bob, client_for):
    created = client_for(bob).post(JOBS, _job(cpu=2, memory="1Gi"), format="json")
    assert created.status_code == 201, created.content
    Node.objects.filter(name="small").delete()  # the only node it fits on leaves the pool
    scheduling_cycle()
    body = client_for(bob).get(f"{JOBS}{created.json()['id']}/").json()
    assert body["status"] == "queued" and body["waiting_on"] == "never_fits"
    reason = body["pending_reason"]
    assert "no node of pool 'local' can ever run it" in reason and "'tiny', has 1 CPU, 4 GiB" in reason
    assert "quota" not in reason
    # The node comes back: it is no longer told it can never run.
    NodeFactory(pool=two_core_pool, name="small", cpu_milli_allocatable=2000, memory_mb_allocatable=8192)
    scheduling_cycle()
    body = client_for(bob).get(f"{JOBS}{created.json()['id']}/").json()
    assert body["waiting_on"] != "never_fits"


def test_the_largest_node_is_the_one_that_covers_most_of_the_ask():
    nodes = [("cpu-heavy", 0, 64000, 8192), ("gpu", 8000, 16000, 65536)]
    refusal = largest_node_refusal(pool_name="p", nodes=nodes, ask=(4000, 32000, 16384))
    assert "'gpu'" in refusal and "32 CPU" in refusal and "GPU," not in refusal.split("asks")[1].split("and")[0]
    assert largest_node_refusal(pool_name="p", nodes=nodes, ask=(0, 64000, 8192)) == ""
    assert largest_node_refusal(pool_name="p", nodes=[], ask=(0, 64000, 8192)) == ""
