"""The periodic tasks (apps/portal/periodic.py) and the loops' health checks."""
import os
import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.core.heartbeat import heartbeat, heartbeat_dir
from apps.portal.periodic import PERIODIC_TASKS, PeriodicPass, PeriodicTask
from apps.projects.models import IdempotencyKey
from tests.factories import ProjectFactory, UserFactory


def test_each_task_runs_once_per_period_and_a_failure_does_not_stop_the_others():
    calls = []

    def broken():
        calls.append("broken")
        raise RuntimeError("boom")

    tasks = (PeriodicTask("a", lambda: calls.append("a"), 3600, ""), PeriodicTask("b", broken, 3600, ""),
             PeriodicTask("c", lambda: calls.append("c"), 0, ""))
    periodic = PeriodicPass(tasks)
    assert periodic() == ["a", "c"]
    assert periodic() == ["c"]  # a waits an hour; the failed b is retried at the next tick
    assert calls == ["a", "broken", "c", "broken", "c"]


@pytest.mark.django_db
def test_run_periodic_once_prunes_what_is_due(capsys):
    project, user = ProjectFactory(), UserFactory()
    IdempotencyKey.objects.create(project=project, user=user, key="old", fingerprint="x", status_code=201)
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(days=2))
    call_command("run_periodic", "--once")
    assert not IdempotencyKey.objects.exists()
    assert capsys.readouterr().out.strip() == "ran: " + ", ".join(t.name for t in PERIODIC_TASKS)


def test_healthcheck_follows_the_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_HEARTBEAT_DIR", str(tmp_path))
    with pytest.raises(CommandError, match="no heartbeat yet"):
        call_command("healthcheck", "scheduler")
    heartbeat("scheduler")
    call_command("healthcheck", "scheduler")
    old = time.time() - 300
    os.utime(heartbeat_dir() / "scheduler", (old, old))
    with pytest.raises(CommandError, match="stuck"):
        call_command("healthcheck", "scheduler", "--max-age", "120")
