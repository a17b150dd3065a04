"""What a node shows of itself: /healthz and `bzzz status` (counts and ids, never a secret)."""

from __future__ import annotations

from typing import Any


def _encryption(node: Any) -> dict[str, Any]:
    ring = getattr(node, "keyring", None)
    fatal = node.projector.fatal if hasattr(node, "projector") else None
    return {
        "sealed": ring is not None,
        "key_id": ring.current.id if ring is not None else None,
        "keys": len(ring.all_keys()) if ring is not None else 0,
        "missing_key": fatal.details.get("key_id") if fatal is not None else None,
    }


def node_status(node: Any) -> dict[str, Any]:
    """A node's state for /healthz and `bzzz status` (what it has built so far)."""
    return {
        "node_id": node.node_id if hasattr(node, "identity") else None,
        "network": node.network,
        "state": str(node.state),
        "healthy": node.healthy if hasattr(node, "bus") else False,
        "slot": node.slot,
        # The projects this node serves, consumes and stores (bzzz.projects).
        "projects": ["*"] if node.projects.every else sorted(node.projects.names),
        # The id of the key new content is sealed with (an id names a key, never shows it).
        "encryption": _encryption(node),
        "projector": node.projector.stats() if hasattr(node, "projector") else None,
        # Why the node's consumer of the log was made again (dropped deliveries, lost with its
        # server), how often; None on a bus without one (in memory).
        "consumer_restarts": getattr(getattr(node, "bus", None), "consumer_restarts", None),
        # The streams the servers spread projects over (1: the log alone; the in-memory bus).
        "partitions": getattr(getattr(node, "bus", None), "partitions", 1),
        "hosted_agents": node.hosted.status() if hasattr(node, "hosted") else None,
        "whoosh": node.whoosh.status() if node.whoosh is not None else None,
        "forwarding": node.front.status() if hasattr(node, "front") else None,
        # The agent directory's values this node left out (unsigned, forged…), by reason.
        "directory": node.listing.status() if hasattr(node, "listing") else None,
        # The peer board: this node's keys, the keys it watches, how many changes it heard.
        "peers": node.peers.status() if hasattr(node, "peers") else None,
        # Per served project: where this node started (snapshot, replay), what it wrote.
        "snapshots": node.snapshots.status() if hasattr(node, "snapshots") else None,
        "webhooks": {
            "delivered": node.webhooks.delivered,
            "failed_attempts": node.webhooks.failed_attempts,
            "dead": node.webhooks.dead,
            "dead_subscriptions": node.webhooks.dead_subscriptions,
        }
        if hasattr(node, "webhooks")
        else None,
        "threads": {
            "monitor_sweeps": node.monitor.sweeps,
            "escalations_fired": node.escalations.fired,
            "escalation_actions_done": node.escalations.actions_done,
            "escalation_action_failures": node.escalations.action_failures,
        }
        if hasattr(node, "monitor")
        else None,
    }
