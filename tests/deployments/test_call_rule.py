"""One rule for who calls a deployment with their own credentials (issue 44, low item): the
gateway lets exactly those in whom the API shows the deployment's `endpoint` (members and above;
every reader of a public deployment), both in the deployment and the workload listings."""
import httpx
import pytest

from apps.projects.choices import may_call_deployment
from apps.workloads.choices import WorkloadStatus
from tests.factories import WorkloadFactory, make_token

pytestmark = pytest.mark.django_db(transaction=True)


def _running(project, pool, name, *, public=False):
    spec = {"command": ["true"], "env": {}, **({"public": True} if public else {})}
    return WorkloadFactory(kind="deployment", project=project, pool=pool, name=name, status=WorkloadStatus.RUNNING,
                           spec=spec, runtime={"backend": "local", "attempt": 1, "alive": True, "replicas": [],
                                               "url": f"http://testserver/serve/{project.slug}/{name}/"})


def test_the_gateway_and_the_api_agree_on_who_calls_a_deployment(gateway_server, project, pool, alice, bob, vera,
                                                                 charlie, client_for):
    deployments = {"private": _running(project, pool, "model"), "public": _running(project, pool, "open", public=True)}
    expected = {  # (private, public): may they call it with their own credentials?
        "alice": (True, True),  # owner
        "bob": (True, True),  # member
        "vera": (False, True),  # viewer: a key for private ones
        "charlie": (None, None),  # outsider: 404 everywhere
    }
    for user in (alice, bob, vera, charlie):
        token = make_token(user)
        client = client_for(user)
        listing = client.get(f"/api/v1/projects/{project.slug}/workloads/")
        for which, callable_ in zip(("private", "public"), expected[user.username], strict=True):
            workload = deployments[which]
            called = httpx.get(f"{gateway_server.url}/serve/{project.slug}/{workload.name}/",
                               headers={"Authorization": f"Bearer {token}"}, timeout=10)
            shown = client.get(f"/api/v1/projects/{project.slug}/deployments/{workload.pk}/")
            if callable_ is None:
                assert (called.status_code, shown.status_code, listing.status_code) == (404, 404, 404), user
                continue
            # Past the gateway's check, a deployment without a ready replica answers 503.
            assert called.status_code == (503 if callable_ else 403), (user.username, which, called.text)
            assert shown.status_code == 200
            endpoint = shown.json()["endpoint"]
            assert (endpoint is not None) == callable_, (user.username, which, endpoint)
            if callable_:
                assert endpoint.endswith(f"/serve/{project.slug}/{workload.name}/")
            listed = {row["id"]: row["endpoint"] for row in listing.json()["results"]}
            assert (listed[workload.pk] is not None) == callable_, (user.username, which)


def test_the_rule_itself():
    assert [may_call_deployment(r, public=False) for r in ("owner", "maintainer", "member", "viewer", None)] == [
        True, True, True, False, False]
    assert [may_call_deployment(r, public=True) for r in ("owner", "maintainer", "member", "viewer", None)] == [
        True, True, True, True, False]
