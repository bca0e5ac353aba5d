"""Why a workload stops is a typed field (stop_cause, preempted_by, term_sent_at, kill_sent_at),
not keys of the backend's runtime; rows stored before the change get their keys copied over."""
from datetime import UTC, datetime
from importlib import import_module

import pytest
from django.apps import apps as django_apps

from apps.workloads.services import workload_preempt
from tests.factories import WorkloadFactory

URL = "/api/v1/projects/vision/training-jobs/"
migration = import_module("apps.workloads.migrations.0005_stop_cause")


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


def test_the_api_shows_the_stop_cause_and_preemptor_as_fields_not_runtime_keys(client, project, pool):
    urgent = WorkloadFactory(project=project, pool=pool, status="running")
    victim = WorkloadFactory(project=project, pool=pool, status="running", runtime={"backend": "local"})
    assert workload_preempt(workload_id=victim.pk, preemptor_id=urgent.pk, message="Preempted.") is not None
    body = client.get(f"{URL}{victim.pk}/").json()
    assert body["stop_cause"] == "preempted" and body["preempted_by"] == urgent.pk
    assert "runtime" not in body
    assert client.get(f"{URL}{urgent.pk}/").json()["stop_cause"] == ""


def test_a_user_stop_records_its_cause(client, project, pool):
    workload = WorkloadFactory(project=project, pool=pool, status="running")
    assert client.post(f"{URL}{workload.pk}/stop/").json()["stop_cause"] == "user"


def test_the_migration_copies_the_old_runtime_keys_into_the_fields(project, pool):
    preemptor = WorkloadFactory(project=project, pool=pool)
    preempted = WorkloadFactory(project=project, pool=pool, status="stopping", runtime={
        "backend": "local", "preempted": True, "preempted_by": preemptor.pk, "term_sent_at": 1700000000.5})
    deadline = WorkloadFactory(project=project, pool=pool, status="stopping", runtime={
        "deadline_exceeded": True, "term_sent_at": 1700000000, "kill_sent_at": 1700000030})
    shutdown = WorkloadFactory(project=project, pool=pool, status="stopping", runtime={"server_shutdown": True})
    requeued = WorkloadFactory(project=project, pool=pool, runtime={"preempted": False, "preempted_by": 10**9})
    untouched = WorkloadFactory(project=project, pool=pool, runtime={"backend": "local", "alive": True})

    migration.copy_runtime_flags(django_apps, None)

    for w in (preempted, deadline, shutdown, requeued, untouched):
        w.refresh_from_db()
    assert (preempted.stop_cause, preempted.preempted_by_id) == ("preempted", preemptor.pk)
    assert preempted.term_sent_at == datetime.fromtimestamp(1700000000.5, tz=UTC) and preempted.kill_sent_at is None
    assert preempted.runtime == {"backend": "local"}
    assert deadline.stop_cause == "deadline" and deadline.runtime == {}
    assert deadline.kill_sent_at == datetime.fromtimestamp(1700000030, tz=UTC)
    assert shutdown.stop_cause == "shutdown" and shutdown.runtime == {}
    assert requeued.stop_cause == "" and requeued.preempted_by_id is None  # the preemptor no longer exists
    assert untouched.stop_cause == "" and untouched.runtime == {"backend": "local", "alive": True}
