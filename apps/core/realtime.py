"""Publish events to websocket groups, after the transaction commits."""
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def project_group(project_id: int) -> str:
    return f"project.{project_id}"


def workload_telemetry_group(workload_id: int) -> str:
    """Samples attributed to one workload (its pods' GPUs): the dashboard's workload page. Named
    here, below both, so that telemetry publishes to it and the workload:<id> topic listens."""
    return f"telemetry.workload.{workload_id}"


def publish(group: str, event: dict) -> None:
    """Send `event` to `group` once the current transaction commits (never before)."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(group, {"type": "cairn.event", "event": event})
        except Exception as exc:  # realtime is best effort; the database is the truth
            logger.warning("realtime: could not publish to %s: %s", group, exc)

    transaction.on_commit(send)
