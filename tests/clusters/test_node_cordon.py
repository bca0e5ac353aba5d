"""Cordons Cairn holds (admin, GPU faults) go through the services and reach the dashboard."""
import asyncio
import threading

import pytest
from channels.layers import get_channel_layer

from apps.clusters.events import NODE_CHANGES_GROUP
from apps.clusters.models import Node
from tests.factories import NodeFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


class _Listener:
    """A channel in NODE_CHANGES_GROUP kept on one event loop (its own thread): the Redis pub/sub
    layer subscribes per event loop, and each async_to_sync call runs on a new one."""

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.channel = self._run(self.layer.new_channel())
        self._run(self.layer.group_add(NODE_CHANGES_GROUP, self.channel))

    def _run(self, coro, timeout: float = 10):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def receive(self) -> dict:
        return self._run(self.layer.receive(self.channel))

    def close(self) -> None:
        self._run(self.layer.flush())  # this loop's subscriptions and connection only
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture
def listener():
    listener = _Listener()
    yield listener
    listener.close()


def test_admin_cordon_and_uncordon_hold_the_node_and_tell_the_cluster_topic(client, listener):
    admin = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(admin)
    node = NodeFactory(schedulable=True, health="healthy")

    url = "/admin/clusters/node/"
    response = client.post(url, {"action": "cordon", "_selected_action": [node.pk]})
    assert response.status_code == 302
    node.refresh_from_db()
    assert (node.schedulable, node.cordon_reason) == (False, "AdminCordon")
    event = listener.receive()["event"]
    assert event["type"] == "node.changed" and event["node"]["cordoned"] is True
    assert admin.username in event["message"]

    client.post(url, {"action": "uncordon", "_selected_action": [node.pk]})
    node = Node.objects.get(pk=node.pk)
    assert (node.schedulable, node.cordon_reason, node.health) == (True, "", "healthy")
    event = listener.receive()["event"]
    assert event["node"]["cordoned"] is False
