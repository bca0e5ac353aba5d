"""Cordons Cairn holds (admin, GPU faults) go through the services and reach the dashboard."""
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from apps.clusters.events import NODE_CHANGES_GROUP
from apps.clusters.models import Node
from tests.factories import NodeFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _listen() -> tuple[object, str]:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(NODE_CHANGES_GROUP, channel)
    return layer, channel


def test_admin_cordon_and_uncordon_hold_the_node_and_tell_the_cluster_topic(client):
    admin = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(admin)
    node = NodeFactory(schedulable=True, health="healthy")
    layer, channel = _listen()

    url = "/admin/clusters/node/"
    response = client.post(url, {"action": "cordon", "_selected_action": [node.pk]})
    assert response.status_code == 302
    node.refresh_from_db()
    assert (node.schedulable, node.cordon_reason) == (False, "AdminCordon")
    event = async_to_sync(layer.receive)(channel)["event"]
    assert event["type"] == "node.changed" and event["node"]["cordoned"] is True
    assert admin.username in event["message"]

    client.post(url, {"action": "uncordon", "_selected_action": [node.pk]})
    node = Node.objects.get(pk=node.pk)
    assert (node.schedulable, node.cordon_reason, node.health) == (True, "", "healthy")
    event = async_to_sync(layer.receive)(channel)["event"]
    assert event["node"]["cordoned"] is False
