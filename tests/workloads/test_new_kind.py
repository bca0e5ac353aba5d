"""A workload kind added by registering its KindSpec alone: routed, listed, served by /kinds/,
submitted through its own collection, scheduled, run on the local backend to the end.

This is the contract for a new kind app: `register_kind(KindSpec(...))` in its ready(), and no
edit of the API root, the serializers, the backends or the clients."""
import importlib

import pytest
from django.urls import clear_url_caches
from rest_framework import serializers

from apps.backends.services import workload_dispatch
from apps.scheduling.services import scheduling_cycle
from apps.workloads import kinds
from apps.workloads.api.serializers import WorkloadCreateSerializer
from apps.workloads.api.views import KindWorkloadViewSet
from apps.workloads.kinds import KindSpec
from apps.workloads.models import Workload
from tests.backends.conftest import script  # noqa: F401  (a fixture: the replica's program)
from tests.backends.helpers import reconcile_until
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db(transaction=True)

P = "/api/v1/projects/vision"


class BatchScriptCreateSerializer(WorkloadCreateSerializer):
    kind = "batch-script"
    program = serializers.CharField(help_text="A Python file to run.")

    def build_spec(self, data):
        return {**super().build_spec(data), "command": ["python", data["program"]]}


class BatchScriptViewSet(KindWorkloadViewSet):
    kind = "batch-script"
    create_serializer_class = BatchScriptCreateSerializer


BATCH = KindSpec(kind="batch-script", route="batch-scripts", label="Batch script", runs_to_completion=True,
                 api_viewset=BatchScriptViewSet)


def _reload_routes() -> None:
    import apps.portal.api.urls
    import config.urls

    importlib.reload(apps.portal.api.urls)
    importlib.reload(config.urls)
    clear_url_caches()


@pytest.fixture
def batch_kind(monkeypatch):
    monkeypatch.setitem(kinds._registry, BATCH.kind, BATCH)
    _reload_routes()
    yield BATCH
    monkeypatch.undo()
    _reload_routes()


def test_a_registered_kind_is_routed_listed_scheduled_and_run(batch_kind, alice, quota, node, client_for, script):  # noqa: F811
    client = client_for(alice)
    served = {row["kind"]: row for row in client.get("/api/v1/kinds/").json()}
    assert served["batch-script"] == {"kind": "batch-script", "label": "Batch script", "route": "batch-scripts",
                                      "runs_to_completion": True, "serves_port": False, "independent_replicas": False}
    assert served["training"]["route"] == "training-jobs" and served["notebook"]["route"] == "notebooks"

    created = client.post(f"{P}/batch-scripts/", {"name": "nightly", "program": script("print('batch ran')")},
                          format="json")
    assert created.status_code == 201, created.json()
    workload_id = created.json()["id"]
    assert created.json()["kind"] == "batch-script"
    assert created.json()["url"] == f"{P}/batch-scripts/{workload_id}/"

    listed = client.get(f"{P}/workloads/")  # the kind-independent list answers for the new kind too
    assert listed.status_code == 200
    assert [(row["id"], row["kind"]) for row in listed.json()["results"]] == [(workload_id, "batch-script")]
    assert client.get(f"{P}/batch-scripts/").json()["count"] == 1
    assert client.get(f"{P}/training-jobs/").json()["count"] == 0

    scheduling_cycle()
    workload = Workload.objects.get(pk=workload_id)
    assert workload.status == "admitted", workload.pending_reason
    workload_dispatch(workload_id=workload_id)
    done = reconcile_until(workload, "succeeded")
    assert done.exit_code == 0
    logs = client.get(f"{P}/batch-scripts/{workload_id}/logs/", HTTP_ACCEPT="text/plain")
    assert logs.status_code == 200 and b"batch ran" in logs.content


def test_a_row_of_a_kind_no_app_registers_is_listed_not_a_500(alice, quota, project, pool, client_for):
    gone = WorkloadFactory(project=project, pool=pool, kind="retired-kind", status="succeeded")
    client = client_for(alice)
    listed = client.get(f"{P}/workloads/")
    assert listed.status_code == 200
    row = listed.json()["results"][0]
    assert row["kind"] == "retired-kind" and row["url"] == f"{P}/workloads/{gone.pk}/" and row["endpoint"] is None
    assert client.get(row["url"]).status_code == 200


def test_kinds_need_a_sign_in(client):
    assert client.get("/api/v1/kinds/").status_code == 401
