"""The capacity others use on a node (issue 42, deliver 3): the node API shows what pods not
Cairn's request (`others_*`) and what is left for Cairn (`free_for_cairn`), and submission refuses
a replica against what is left, not against the raw allocatable."""
from tests.factories import NodeFactory, QuotaFactory

NODES = "/api/v1/nodes/"
JOBS = "/api/v1/projects/vision/training-jobs/"


def _node(pool, **fields):
    return NodeFactory(pool=pool, name="gpu-0", gpu_count=8, gpu_model="H100", cpu_milli_allocatable=16000,
                       memory_mb_allocatable=65536, **fields)


def test_node_api_shows_what_others_hold_and_what_is_left_for_cairn(pool, alice, bob, charlie, client_for):
    _node(pool, others_gpu_milli=6000, others_cpu_milli=4000, others_memory_mb=8192)
    for user in (alice, bob, charlie):  # nodes are the platform's, readable by every signed-in user
        body = client_for(user).get(NODES).json()
        row = next(n for n in body["results"] if n["name"] == "gpu-0")
        assert (row["others_gpu_milli"], row["others_cpu_milli"], row["others_memory_mb"]) == (6000, 4000, 8192)
        assert row["free_for_cairn"] == {"gpu_milli": 2000, "cpu_milli": 12000, "memory_mb": 57344}
    assert client_for().get(NODES).status_code == 401


def test_free_for_cairn_never_goes_below_zero(pool, bob, client_for):
    _node(pool, others_cpu_milli=20000)  # others' requests above the allocatable (a resize, a lag)
    row = client_for(bob).get(NODES).json()["results"][0]
    assert row["free_for_cairn"]["cpu_milli"] == 0 and row["free_for_cairn"]["gpu_milli"] == 8000


def test_submission_checks_a_replica_against_what_others_leave(project, pool, bob, client_for):
    QuotaFactory(project=project, pool=pool)
    _node(pool, others_gpu_milli=6000)
    refused = client_for(bob).post(JOBS, {"name": "big", "command": "true", "resources": {"gpu": 4}}, format="json")
    assert refused.status_code == 400, refused.content
    detail = refused.json()["detail"]
    assert "can ever run it" in detail and "2 GPU allocatable for Cairn" in detail and "not Cairn's" in detail
    fits = client_for(bob).post(JOBS, {"name": "fits", "command": "true", "resources": {"gpu": 2}}, format="json")
    assert fits.status_code == 201, fits.content


def test_without_others_the_refusal_names_the_allocatable_alone(project, pool, bob, client_for):
    QuotaFactory(project=project, pool=pool)
    _node(pool)
    refused = client_for(bob).post(JOBS, {"name": "big", "command": "true", "resources": {"gpu": 9}}, format="json")
    assert refused.status_code == 400 and "8 GPU allocatable." in refused.json()["detail"]
