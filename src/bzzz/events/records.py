"""What the subscription service and the CLI's subscription commands both use: the payload of a
removal, the refusal of an unknown id, the redrive of dead deliveries.

Kept apart from :mod:`bzzz.events.service` so that `bzzz subscriptions …` loads no event log or
projector to list or change subscriptions.
"""

from __future__ import annotations

from typing import Any

from bzzz import domain
from bzzz.errors import InvalidParameters
from bzzz.store.subscription_repository import SubscriptionRepository


def removal_payload(subscription_id: str, session_id: str | None, reason: str) -> dict[str, Any]:
    """The payload of a ``subscription.removed`` envelope (MCP unsubscribe, the CLI)."""
    return {"subscription_id": subscription_id, "session_id": session_id, "reason": reason}


def no_subscription(subscription_id: str) -> InvalidParameters:
    """The refusal for an unknown (or already removed) subscription id."""
    return InvalidParameters(
        f"no subscription '{subscription_id}'", details={"subscription_id": subscription_id}
    )


async def redrive(repo: SubscriptionRepository, delivery_ids: list[int] | None) -> list[int]:
    """Put dead deliveries back in this node's queue, due now; refuse ids that are not dead.

    A local change, not an envelope: the queue is the owning node's own (never projected),
    and only that node can send its deliveries.
    """
    if delivery_ids is not None:
        found = await repo.deliveries_by_id(delivery_ids)
        missing = sorted(set(delivery_ids) - {d.id for d in found})
        if missing:
            raise InvalidParameters(
                f"no webhook delivery {', '.join(map(str, missing[:10]))} on this node",
                details={"missing": missing[:100]},
            )
        alive = sorted(d.id for d in found if d.status != "dead")
        if alive:
            raise InvalidParameters(
                f"delivery {', '.join(map(str, alive[:10]))} is not dead-lettered",
                details={"not_dead": alive[:100]},
            )
    return await repo.redrive(delivery_ids, domain.utcnow())
