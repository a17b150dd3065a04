"""What the CLI does to subscriptions and webhook deliveries, with or without a running node.

Removing a subscription is network state: the CLI signs a ``subscription.removed`` envelope
with the data directory's node key and stores it in the network's log (joining the embedded
server a local node runs, or starting it when none does), so every node removes it. Redriving
a dead delivery is not: the delivery queue is the owning node's own and never projected, so
the CLI changes this node's store and its dispatcher sends the delivery within seconds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bzzz import domain
from bzzz.config import Settings
from bzzz.domain import iso
from bzzz.events.records import no_subscription, redrive, removal_payload
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.join import joined_bus
from bzzz.network.sealing import keyring_of
from bzzz.store.database import Database
from bzzz.store.repository import Repository
from bzzz.store.subscription_repository import SubscriptionRepository

T = TypeVar("T")


async def _in_store(settings: Settings, work: Callable[[Any], Awaitable[T]]) -> T:
    db = Database(settings.database_url(), keyring_of(settings, create=False))
    try:
        await db.open()
        async with db.session() as session:
            return await work(session)
    finally:
        await db.close()


def subscription_json(sub: domain.Subscription) -> dict[str, Any]:
    """A subscription as ``bzzz subscriptions list --json`` prints it."""
    return {
        "subscription_id": sub.id,
        "subscriber_id": sub.subscriber_id,
        "event_types": sub.event_types,
        "filter_address": sub.filter_address,
        "callback_webhook": sub.callback_webhook,
        "node_id": sub.node_id,
        "session_id": sub.session_id,
        "status": sub.status,
        "created_at": iso(sub.created_at),
    }


async def list_subscriptions(settings: Settings, limit: int) -> list[domain.Subscription]:
    """The network's subscriptions as this data directory's store has them, newest first."""
    return await _in_store(settings, lambda s: SubscriptionRepository(s).subscriptions(limit))


async def redrive_deliveries(settings: Settings, ids: list[int] | None) -> list[int]:
    """Queue this node's dead deliveries (these, or all) again; the ids redriven."""
    return await _in_store(settings, lambda s: redrive(SubscriptionRepository(s), ids))


async def delete_subscription(settings: Settings, subscription_id: str) -> int:
    """Remove a subscription from the network; the log sequence that stored the removal."""
    found = await _in_store(settings, lambda s: Repository(s).subscription(subscription_id))
    if found is None:
        raise no_subscription(subscription_id)
    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    network = settings.bzzz.network_id
    envelope = seal(
        NodeIdentity.load_or_create(data_dir),
        network,
        "subscription.removed",
        f"bzzz.{network}.sub.{subscription_id}",
        removal_payload(subscription_id, None, "removed with bzzz subscriptions delete"),
        keyring=keyring_of(settings, create=False),
    )
    async with joined_bus(settings) as bus:
        return await bus.publish(envelope.subject, envelope.to_bytes(), envelope.id)
