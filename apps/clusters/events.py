"""Realtime payloads and groups of the cluster inventory (sent after commit through apps.core.realtime)."""
from __future__ import annotations

NODE_CHANGES_GROUP = "cluster.nodes"  # cordons and health changes of nodes


def node_changed_event(node, *, reason: str, message: str) -> dict:
    return {
        "type": "node.changed",
        "node": {"id": node.pk, "name": node.name, "cluster": node.cluster.name,
                 "pool": node.pool.name if node.pool_id else None, "health": node.health,
                 "schedulable": node.schedulable, "cordoned": not node.schedulable},
        "reason": reason,
        "message": message,
    }
