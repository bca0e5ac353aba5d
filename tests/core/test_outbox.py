"""The outbox: a workload committed while the broker is down is still dispatched once it is back,
through a real relay process and a real Celery worker on Redis."""
import socket

import pytest
from django.conf import settings

from apps.core.models import OutboxMessage
from apps.core.outbox import outbox_enqueue, outbox_relay
from apps.workloads.models import Workload
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory
from tests.processes import cairn_env, celery_worker, manage, wait_for


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_enqueue_rejects_unknown_topics(db):
    with pytest.raises(ValueError):
        outbox_enqueue(topic="nope", payload={})


def test_failed_delivery_keeps_the_row_for_the_next_try(db):
    outbox_enqueue(topic="scheduling.cycle", payload={})

    def broken(message):
        raise ConnectionError("broker unreachable")

    assert outbox_relay(deliver=broken) == 0
    row = OutboxMessage.objects.get()
    assert row.sent_at is None and row.attempts == 1 and "unreachable" in row.last_error
    delivered = []
    assert outbox_relay(deliver=delivered.append) == 1
    assert delivered == [row] and OutboxMessage.objects.get().sent_at is not None
    assert outbox_relay(deliver=delivered.append) == 0


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_broker_down_at_commit_then_back(project, pool, tmp_path):
    NodeFactory(pool=pool, name="n1")
    QuotaFactory(project=project, pool=pool)
    workload = WorkloadFactory(project=project, pool=pool)
    outbox_enqueue(topic="scheduling.cycle", payload={})

    down = manage("run_outbox", "--interval", "0.2",
                  env=cairn_env(REDIS_URL=f"redis://127.0.0.1:{_dead_port()}/0"), log=tmp_path / "relay-down.log")
    try:
        wait_for(lambda: OutboxMessage.objects.filter(attempts__gte=2).exists(), message="failed publish attempts")
        assert OutboxMessage.objects.filter(sent_at__isnull=True).count() == 1
    finally:
        down.stop()
    assert Workload.objects.get(pk=workload.pk).status == "queued"

    env = cairn_env(REDIS_URL=settings.REDIS_URL)
    worker = celery_worker(env, tmp_path / "worker.log")
    relay = manage("run_outbox", "--interval", "0.2", env=env, log=tmp_path / "relay.log")
    try:
        wait_for(lambda: Workload.objects.get(pk=workload.pk).status != "queued", timeout=60,
                 message="the worker to run the scheduling cycle")
        assert Workload.objects.get(pk=workload.pk).status in ("admitted", "running", "succeeded")
        # the admission itself wrote a dispatch message, which the relay also sent
        wait_for(lambda: OutboxMessage.objects.filter(topic="workload.dispatch", sent_at__isnull=False).exists(),
                 message="dispatch message relayed")
    finally:
        relay.stop()
        worker.stop()
    assert "cairn.scheduling_cycle" in worker.output()
