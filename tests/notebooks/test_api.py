"""The notebooks' API: start again, the culler's view, reclaimed GPU-hours, the spec's ide and
idle_timeout, the project's notebook settings."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.notebooks.models import NotebookActivity, NotebookReclaim
from tests.factories import WorkloadFactory

BASE = "/api/v1/projects/vision/notebooks"


@pytest.fixture
def stopped(bob, project, pool, quota):
    return WorkloadFactory(project=project, pool=pool, kind="notebook", status="stopped", created_by=bob,
                           status_reason="IdleReclaimed", attempt=1, finished_at=timezone.now())


def test_the_creator_starts_a_stopped_notebook_again(bob, stopped, client_for):
    answer = client_for(bob).post(f"{BASE}/{stopped.pk}/start/")
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert (body["status"], body["status_reason"], body["finished_at"]) == ("queued", "StartRequested", None)
    assert stopped.events.filter(reason="StartRequested", from_status="stopped", to_status="queued").exists()


def test_another_member_may_not_start_it_but_a_maintainer_may(bob, alice, vera, project, pool, quota, client_for):
    from tests.factories import UserFactory

    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook", status="stopped", created_by=alice)
    assert client_for(bob).post(f"{BASE}/{notebook.pk}/start/").status_code == 403
    assert client_for(vera).post(f"{BASE}/{notebook.pk}/start/").status_code == 403
    assert client_for(UserFactory()).post(f"{BASE}/{notebook.pk}/start/").status_code == 404
    assert client_for(alice).post(f"{BASE}/{notebook.pk}/start/").status_code == 202


@pytest.mark.parametrize("status", ["running", "queued", "stopping", "failed", "succeeded"])
def test_only_a_stopped_notebook_starts_again(status, bob, project, pool, quota, client_for):
    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook", status=status, created_by=bob)
    answer = client_for(bob).post(f"{BASE}/{notebook.pk}/start/")
    assert answer.status_code == 409 and "only a stopped notebook" in answer.json()["detail"]


def test_training_jobs_have_no_start(bob, project, pool, quota, client_for):
    job = WorkloadFactory(project=project, pool=pool, kind="training", status="stopped", created_by=bob)
    assert client_for(bob).post(f"{BASE}/{job.pk}/start/").status_code == 404


def test_activity_shows_idle_time_deadline_and_gpu(bob, vera, project, pool, quota, client_for):
    started = timezone.now() - timedelta(minutes=10)
    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook", status="running", created_by=bob,
                               attempt=1, started_at=started, spec={"env": {}, "idle_timeout": 1800})
    body = client_for(vera).get(f"{BASE}/{notebook.pk}/activity/").json()
    assert body["idle_timeout"] == 1800 and 590 < body["idle_seconds"] < 700 and body["checked_at"] is None
    active = timezone.now() - timedelta(minutes=2)
    NotebookActivity.objects.create(workload=notebook, attempt=1, checked_at=timezone.now(), active_at=active,
                                    deadline=active + timedelta(seconds=1800), busy_kernels=0, kernels=2,
                                    gpu_utilisation=3.5, reached=True, summary="Idle for 2m of 30m.")
    body = client_for(vera).get(f"{BASE}/{notebook.pk}/activity/").json()
    assert 110 < body["idle_seconds"] < 200 and body["gpu_utilisation"] == 3.5 and body["kernels"] == 2
    assert body["cull_at"].startswith((active + timedelta(seconds=1800)).isoformat()[:16])


def test_the_project_default_idle_timeout_applies_and_zero_means_never(bob, project, pool, quota, client_for):
    notebook = WorkloadFactory(project=project, pool=pool, kind="notebook", status="running", created_by=bob,
                               started_at=timezone.now(), spec={"env": {}})
    assert client_for(bob).get(f"{BASE}/{notebook.pk}/activity/").json()["idle_timeout"] == 3600
    project.notebook_idle_timeout = 0
    project.save(update_fields=["notebook_idle_timeout"])
    body = client_for(bob).get(f"{BASE}/{notebook.pk}/activity/").json()
    assert body["idle_timeout"] == 0 and body["cull_at"] is None


def test_reclaimed_gpu_hours_count_until_started_again(bob, project, pool, quota, client_for):
    now = timezone.now()
    NotebookReclaim.objects.create(project=project, reclaimed_at=now - timedelta(hours=3), gpus=2, idle_seconds=3600,
                                   restarted_at=now - timedelta(hours=2))
    NotebookReclaim.objects.create(project=project, reclaimed_at=now - timedelta(hours=1), gpus=1, idle_seconds=3600)
    body = client_for(bob).get(f"{BASE}/reclaimed/").json()
    assert body["reclaims"] == 2 and 2.99 < body["gpu_hours"] < 3.05


def test_create_takes_ide_and_idle_timeout_and_refuses_bad_ones(bob, project, pool, quota, client_for, settings,
                                                                 tmp_path):
    installed = tmp_path / "code-server"  # the check looks for the file only
    installed.write_text("#!/bin/sh\n")
    settings.CAIRN = {**settings.CAIRN, "CODE_SERVER": str(installed)}
    client = client_for(bob)
    made = client.post(f"{BASE}/", {"name": "nb", "ide": "vscode", "idle_timeout": 0,
                                    "resources": {"cpu": 0.5, "memory": "256Mi"}}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["spec"]["ide"] == "vscode" and made.json()["spec"]["idle_timeout"] == 0
    for bad in ({"ide": "emacs"}, {"idle_timeout": -1}, {"idle_timeout": 10**9}, {"idle_timeout": "soon"}):
        answer = client.post(f"{BASE}/", {"resources": {"cpu": 0.5}, **bad}, format="json")
        assert answer.status_code == 400 and answer.json()["detail"], answer.content


def test_project_notebook_settings_are_for_maintainers_to_change(alice, bob, project, client_for):
    answer = client_for(alice).patch("/api/v1/projects/vision/", {"shared_notebooks": True,
                                                                  "notebook_idle_timeout": 600}, format="json")
    assert answer.status_code == 200 and answer.json()["shared_notebooks"] is True
    assert answer.json()["notebook_idle_timeout"] == 600
    assert client_for(bob).patch("/api/v1/projects/vision/", {"shared_notebooks": False},
                                 format="json").status_code == 403
    assert client_for(alice).patch("/api/v1/projects/vision/", {"notebook_idle_timeout": -5},
                                   format="json").status_code == 400


def test_a_vscode_notebook_is_refused_at_submit_where_code_server_is_missing(bob, project, pool, quota, client_for,
                                                                            settings, tmp_path, monkeypatch):
    settings.CAIRN = {**settings.CAIRN, "CODE_SERVER": str(tmp_path / "missing")}
    monkeypatch.setenv("PATH", str(tmp_path))  # none on PATH either
    client = client_for(bob)
    answer = client.post(f"{BASE}/", {"name": "code", "ide": "vscode", "resources": {"cpu": 0.5, "memory": "256Mi"}},
                         format="json")
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert "make code-server" in body["detail"] and "jupyterlab" in body["detail"], body
    assert "make code-server" in " ".join(body["errors"]["ide"]), body  # by field, for the form
    assert not client.get(f"{BASE}/").json()["results"]  # nothing was queued
    # JupyterLab needs no code-server: still accepted
    made = client.post(f"{BASE}/", {"name": "lab", "resources": {"cpu": 0.5, "memory": "256Mi"}}, format="json")
    assert made.status_code == 201, made.content
