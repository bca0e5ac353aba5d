"""The transactional outbox: enqueue inside the transaction, relay after commit.

`outbox_enqueue` must be called inside the transaction that makes the change. The relay
hands each unsent row to its handler: a Celery task in server mode, or the task function
itself, in-process, in embedded mode (CAIRN_TASKS_IN_PROCESS).
"""
import logging
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .models import OutboxMessage

logger = logging.getLogger(__name__)

# topic -> dotted path of the Celery task that handles it. Tasks take the payload as kwargs.
TOPICS: dict[str, str] = {
    "scheduling.cycle": "apps.scheduling.tasks.scheduling_cycle_task",
    "workload.dispatch": "apps.backends.tasks.workload_dispatch_task",
    "workload.stop": "apps.backends.tasks.workload_stop_task",
}


def outbox_enqueue(*, topic: str, payload: dict) -> OutboxMessage:
    if topic not in TOPICS:
        raise ValueError(f"unknown outbox topic {topic!r}")
    message = OutboxMessage.objects.create(topic=topic, payload=payload)
    if settings.CAIRN_TASKS_IN_PROCESS:
        # Wake the embedded relay right after commit instead of waiting for its next tick.
        transaction.on_commit(outbox_wakeup.set)
    return message


class _Wakeup:
    def __init__(self) -> None:
        import threading

        self.event = threading.Event()

    def set(self) -> None:
        self.event.set()

    def wait(self, timeout: float) -> None:
        self.event.wait(timeout)
        self.event.clear()


outbox_wakeup = _Wakeup()


def _load_task(topic: str):
    from importlib import import_module

    module, _, name = TOPICS[topic].rpartition(".")
    return getattr(import_module(module), name)


def _deliver(message: OutboxMessage) -> None:
    task = _load_task(message.topic)
    if settings.CAIRN_TASKS_IN_PROCESS:
        task.run(**message.payload)
    else:
        task.apply_async(kwargs=message.payload, retry=False)


def outbox_relay(*, limit: int = 100, deliver: Callable[[OutboxMessage], None] = _deliver) -> int:
    """Send up to `limit` unsent messages; return how many were sent.

    Rows are claimed with SKIP LOCKED so several relays never send the same row twice at
    once; a row whose delivery fails stays unsent and is retried on the next call. Tasks are
    idempotent, so an at-least-once delivery is safe.
    """
    sent = 0
    with transaction.atomic():
        queryset = OutboxMessage.objects.filter(sent_at__isnull=True).order_by("id")
        if transaction.get_connection().features.has_select_for_update_skip_locked:
            queryset = queryset.select_for_update(skip_locked=True)
        claimed = list(queryset[:limit])
        if not claimed:
            return 0
        if settings.CAIRN_TASKS_IN_PROCESS:
            # In-process handlers write to the database themselves: mark first, run after commit.
            OutboxMessage.objects.filter(pk__in=[m.pk for m in claimed]).update(
                sent_at=timezone.now(), attempts=F("attempts") + 1
            )
        else:
            for message in claimed:
                try:
                    deliver(message)
                except Exception as exc:  # broker down: keep the row, try again later
                    logger.warning("outbox: could not publish %s: %s", message, exc)
                    OutboxMessage.objects.filter(pk=message.pk).update(
                        attempts=message.attempts + 1, last_error=str(exc)[:2000]
                    )
                    break
                OutboxMessage.objects.filter(pk=message.pk).update(
                    sent_at=timezone.now(), attempts=message.attempts + 1
                )
                sent += 1
            return sent
    for message in claimed:
        try:
            deliver(message)
        except Exception:
            # In-process handlers are level-triggered services: the scheduler and reconciler
            # loops repair whatever a failed handler left undone.
            logger.exception("outbox: in-process handler for %s failed", message)
        sent += 1
    return sent
