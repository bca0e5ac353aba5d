"""50 concurrent submissions through the API against an 8-GPU quota, with two real scheduler
processes running (one started by mistake): admitted GPUs never exceed the quota."""
import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.workloads.choices import ACTIVE
from apps.workloads.models import Workload
from tests.factories import MembershipFactory, NodeFactory, QuotaFactory, UserFactory
from tests.processes import cairn_env, manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_fifty_concurrent_submissions_never_exceed_an_eight_gpu_quota(project, pool, tmp_path):
    NodeFactory(pool=pool, name="node-a", gpu_count=16, cpu_milli_allocatable=256000, memory_mb_allocatable=10**6)
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=8000, nominal_cpu_milli=256000,
                 nominal_memory_mb=10**6, borrowing_limit_gpu_milli=0)
    user = UserFactory(username="alice")
    MembershipFactory(project=project, user=user, role="owner")
    env = cairn_env(CAIRN_SCHEDULER_INTERVAL="0.1")
    schedulers = [manage("run_scheduler", env=env, log=tmp_path / f"scheduler{i}.log") for i in range(2)]
    samples: list[int] = []
    stop_sampling = threading.Event()
    errors: list[str] = []

    def sample():
        try:
            while not stop_sampling.is_set():
                rows = Workload.objects.filter(status__in=ACTIVE).values_list("gpu_milli", "replicas")
                samples.append(sum(g * r for g, r in rows))
                time.sleep(0.02)
        finally:
            connection.close()

    def submit(i: int):
        try:
            client = APIClient()
            client.force_authenticate(user=user)
            response = client.post(f"/api/v1/projects/{project.slug}/training-jobs/", {
                "name": f"job-{i}", "command": "true", "resources": {"gpu": 1 if i % 3 else 2, "cpu": 1},
            }, format="json")
            if response.status_code != 201:
                errors.append(f"{response.status_code} {response.content[:200]}")
        finally:
            connection.close()

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        threads = [threading.Thread(target=submit, args=(i,)) for i in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []

        def admitted_gpus():
            return sum(w.gpu_milli for w in Workload.objects.filter(status__in=ACTIVE))

        # Demand (67 GPUs) exceeds the quota: the schedulers fill it to at least 6 GPUs.
        wait_for(lambda: admitted_gpus() >= 6000, timeout=30, message="6 GPUs admitted")
        time.sleep(1)  # a few more cycles by both processes
    finally:
        stop_sampling.set()
        sampler.join()
        for process in schedulers:
            process.stop()
    assert samples and max(samples) <= 8000, max(samples)
    assert max(samples) >= 6000
    queued = Workload.objects.filter(status="queued")
    assert queued.count() >= 42 and all(w.pending_reason.startswith("quota") for w in queued)
    assert all(process.popen.returncode is not None for process in schedulers)
