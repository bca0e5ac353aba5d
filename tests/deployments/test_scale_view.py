"""GET .../deployments/<id>/ says how many replicas are desired (the autoscaler's wish), admitted and
ready, and the autoscaling settings with their defaults (issue 46, item 6): the dashboard and
`cairn get` show them instead of the start's "Started 1 replica(s)"."""
from apps.deployments.models import DeploymentScale
from tests.factories import WorkloadFactory


def _scale(client, deployment) -> dict:
    answer = client.get(f"/api/v1/projects/vision/deployments/{deployment.pk}/")
    assert answer.status_code == 200, answer.content
    return answer.json()["scale"]


def test_an_autoscaled_deployment_says_desired_admitted_and_ready(project, pool, bob, client_for):
    deployment = WorkloadFactory(
        project=project, pool=pool, kind="deployment", name="digits", status="running", replicas=3,
        spec={"command": ["serve"], "env": {}, "autoscaling": {"min_replicas": 1, "max_replicas": 4}},
        runtime={"replicas": [{"replica": 0, "ready": True}, {"replica": 1, "ready": True}, {"replica": 2}]})
    DeploymentScale.objects.create(workload=deployment, desired=4)
    assert _scale(client_for(bob), deployment) == {
        "desired": 4, "admitted": 3, "ready": 2,
        "autoscaling": {"min_replicas": 1, "max_replicas": 4, "target_concurrency": 10.0,
                        "stable_window_seconds": 60.0, "panic_window_seconds": 6.0}}


def test_a_fixed_deployment_and_a_stopped_one(project, pool, bob, client_for):
    fixed = WorkloadFactory(project=project, pool=pool, kind="deployment", name="fixed", status="running", replicas=2,
                            spec={"command": ["serve"], "env": {}},
                            runtime={"replicas": [{"replica": 0, "ready": True}, {"replica": 1, "ready": True}]})
    assert _scale(client_for(bob), fixed) == {"desired": 2, "admitted": 2, "ready": 2, "autoscaling": None}
    stopped = WorkloadFactory(project=project, pool=pool, kind="deployment", name="gone", status="stopped", replicas=3,
                              spec={"command": ["serve"], "env": {}},
                              runtime={"replicas": [{"replica": 0, "ready": True}]})
    assert _scale(client_for(bob), stopped) == {"desired": 0, "admitted": 0, "ready": 0, "autoscaling": None}
    listed = client_for(bob).get("/api/v1/projects/vision/deployments/").json()["results"]
    assert {row["name"]: row["scale"]["ready"] for row in listed} == {"fixed": 2, "gone": 0}


def test_the_create_answer_is_the_detail_answer(project, pool, quota, alice, client_for):
    """POST's 201 body is a Deployment as the schema documents it (scale included), the same as GET's
    (schemathesis found `scale` missing from it)."""
    client = client_for(alice)
    created = client.post("/api/v1/projects/vision/deployments/", {"name": "digits", "command": "serve",
                                                                   "autoscaling": {"min_replicas": 0, "max_replicas": 2}},
                          format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["scale"]["autoscaling"]["max_replicas"] == 2 and body["gateway_url"].endswith("/serve/vision/digits/")
    assert body == client.get(f"/api/v1/projects/vision/deployments/{body['id']}/").json()
