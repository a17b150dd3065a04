"""Reads and writes of subscriptions and this node's delivery queue (CLI and service)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz import domain
from bzzz.store.models import DeliveryRow, SubscriptionRow
from bzzz.store.rows import delivery_from_row, subscription_from_row


class SubscriptionRepository:
    """Queries over one session (one transaction)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def subscriptions(self, limit: int) -> list[domain.Subscription]:
        """Subscriptions of the network, newest first."""
        rows = await self.session.scalars(
            select(SubscriptionRow)
            .order_by(SubscriptionRow.created_at.desc(), SubscriptionRow.id.desc())
            .limit(limit)
        )
        return [subscription_from_row(r) for r in rows]

    async def ending_subscriptions(
        self, node_id: str, session_id: str | None, agent_ids: list[str] | None
    ) -> int:
        """How many of a node's subscriptions without a webhook a session or agents hold."""
        query = (
            select(func.count())
            .select_from(SubscriptionRow)
            .where(SubscriptionRow.node_id == node_id, SubscriptionRow.callback_webhook.is_(None))
        )
        if session_id is not None:
            query = query.where(SubscriptionRow.session_id == session_id)
        if agent_ids is not None:
            query = query.where(SubscriptionRow.subscriber_id.in_(agent_ids))
        return int((await self.session.execute(query)).scalar_one())

    async def count_active(self, *, session_id: str | None, subscriber_id: str | None) -> int:
        """Active subscriptions a session (or key) made, or that an agent holds."""
        query = select(func.count()).select_from(SubscriptionRow)
        query = query.where(SubscriptionRow.status == "active")
        if session_id is not None:
            query = query.where(SubscriptionRow.session_id == session_id)
        if subscriber_id is not None:
            query = query.where(SubscriptionRow.subscriber_id == subscriber_id)
        return int((await self.session.execute(query)).scalar_one())

    async def failing_since(self, subscription_id: str) -> datetime | None:
        """Since when none of a subscription's deliveries got through: the creation of its
        oldest undelivered delivery made after its last delivered one (None: none failing)."""
        last_ok = (
            select(func.max(DeliveryRow.finished_at))
            .where(
                DeliveryRow.subscription_id == subscription_id, DeliveryRow.status == "delivered"
            )
            .scalar_subquery()
        )
        query = select(func.min(DeliveryRow.created_at)).where(
            DeliveryRow.subscription_id == subscription_id,
            DeliveryRow.status != "delivered",
            or_(last_ok.is_(None), DeliveryRow.created_at > last_ok),
        )
        found: datetime | None = (await self.session.execute(query)).scalar_one_or_none()
        return found

    async def deliveries_by_id(self, ids: list[int]) -> list[domain.Delivery]:
        """The deliveries with these ids (those that exist)."""
        rows = await self.session.scalars(select(DeliveryRow).where(DeliveryRow.id.in_(ids)))
        return [delivery_from_row(r) for r in rows]

    async def redrive(self, ids: list[int] | None, now: datetime) -> list[int]:
        """Make dead deliveries (these, or all) pending and due now, with a fresh max_age."""
        query = select(DeliveryRow.id).where(DeliveryRow.status == "dead")
        if ids is not None:
            query = query.where(DeliveryRow.id.in_(ids))
        redriven = sorted((await self.session.scalars(query)).all())
        if redriven:
            await self.session.execute(
                update(DeliveryRow)
                .where(DeliveryRow.id.in_(redriven))
                .values(
                    status="pending",
                    attempts=0,
                    next_attempt_at=now,
                    created_at=now,
                    finished_at=None,
                )
            )
        return redriven
