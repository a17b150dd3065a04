"""Subscriptions in the projection: created, removed, ended, dead; the fan-out of events to them.

Only the node that owns a subscription matches events to it and records them (its resource
and its webhook queue); every node keeps the subscription rows, which are network state.

The fan-out costs what it delivers: subscriptions are indexed by event type and by the agent
or role their filter names, so an event meets only the subscriptions that may want it, and a
session's own subscriptions end (one envelope) before its agents go offline, so a mass
disconnect is not fanned out to subscriptions that are ending with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.address import Address, parse_address
from bzzz.errors import BzzzError
from bzzz.network.envelope import Envelope
from bzzz.store.models import DeliveryRow, EventRow, SubscriptionRow
from bzzz.store.projection import (
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _check_names,
    _optional_text,
    _strict_json,
    _text,
    stage,
)
from bzzz.store.rows import subscription_from_row

# Envelopes after which a node's matching reloads its subscriptions.
SUBSCRIPTION_CHANGES = frozenset(
    {"subscription.created", "subscription.removed", "subscription.ended", "subscription.dead"}
)


def _filter_of(sub: domain.Subscription) -> Address | None:
    try:
        return parse_address(sub.filter_address) if sub.filter_address else None
    except BzzzError:
        return None


def subscription_matches(sub: domain.Subscription, ev: domain.Event) -> bool:
    """True when the event is of a subscribed type and inside the filter address."""
    if ev.type not in sub.event_types:
        return False
    if not sub.filter_address and sub.projects is None:
        return True
    wanted = _filter_of(sub)
    try:
        address = parse_address(ev.address)
    except BzzzError:
        return False
    if not _in_projects(sub, address):
        return False
    return not sub.filter_address or (wanted is not None and wanted.covers(address))


def _in_projects(sub: domain.Subscription, address: Address | None) -> bool:
    """A subscriber limited to projects hears only their events (None: every project)."""
    if sub.projects is None:
        return True
    return address is not None and address.project in sub.projects


@dataclass(slots=True)
class _Bucket:
    """The subscriptions of one event type: by the agent or role their filter names, or any."""

    anywhere: list[tuple[domain.Subscription, Address | None]] = field(default_factory=list)
    by_agent: dict[str, list[tuple[domain.Subscription, Address]]] = field(default_factory=dict)
    by_role: dict[str, list[tuple[domain.Subscription, Address]]] = field(default_factory=dict)

    def add(self, sub: domain.Subscription, wanted: Address | None) -> None:
        if wanted is not None and wanted.agent is not None:
            self.by_agent.setdefault(wanted.agent, []).append((sub, wanted))
        elif wanted is not None and wanted.role is not None:
            self.by_role.setdefault(wanted.role, []).append((sub, wanted))
        else:
            self.anywhere.append((sub, wanted))

    def matching(self, address: Address | None) -> list[domain.Subscription]:
        if address is None:
            # An event without a readable address reaches only unfiltered subscriptions.
            return [
                sub
                for sub, wanted in self.anywhere
                if wanted is None and _in_projects(sub, address)
            ]
        candidates = list(self.anywhere)
        if address.agent is not None:
            candidates.extend(self.by_agent.get(address.agent, ()))
        if address.role is not None:
            candidates.extend(self.by_role.get(address.role, ()))
        return [
            sub
            for sub, wanted in candidates
            if (wanted is None or wanted.covers(address)) and _in_projects(sub, address)
        ]


class SubscriptionIndex:
    """A node's active subscriptions, indexed so that an event meets only those it may match."""

    def __init__(self, subscriptions: Iterable[domain.Subscription]) -> None:
        self._by_type: dict[str, _Bucket] = {}
        self.count = 0
        for sub in subscriptions:
            wanted = _filter_of(sub)
            if sub.filter_address and wanted is None:
                continue  # a filter that does not parse matches nothing
            for type_ in dict.fromkeys(sub.event_types):
                self._by_type.setdefault(type_, _Bucket()).add(sub, wanted)
            self.count += 1

    def matching(self, ev: domain.Event) -> list[domain.Subscription]:
        """The subscriptions ``ev`` is delivered to."""
        bucket = self._by_type.get(ev.type)
        if bucket is None:
            return []
        try:
            address: Address | None = parse_address(ev.address)
        except BzzzError:
            address = None
        return bucket.matching(address)


def load_index(session: Session, node_id: str) -> SubscriptionIndex:
    """The index of a node's active subscriptions, read in the batch's transaction."""
    rows = session.scalars(
        select(SubscriptionRow).where(
            SubscriptionRow.node_id == node_id, SubscriptionRow.status == "active"
        )
    )
    return SubscriptionIndex(subscription_from_row(r) for r in rows)


def fan_out(
    session: Session, index: SubscriptionIndex, events: list[domain.Event]
) -> list[tuple[domain.Subscription, domain.Event]]:
    """Record each event for the subscriptions it reaches; the (subscription, event) pairs."""
    matched = []
    for ev in events:
        for sub in index.matching(ev):
            _record(session, sub, ev)
            matched.append((sub, ev))
    return matched


def _record(session: Session, sub: domain.Subscription, ev: domain.Event) -> None:
    body = ev.to_json() | {"subscription_id": sub.id}
    stage(
        session,
        EventRow,
        subscription_id=sub.id,
        event_id=ev.id,
        event_type=ev.type,
        payload=body,
        created_at=ev.timestamp,
    )
    if sub.callback_webhook:
        now = domain.utcnow()
        stage(
            session,
            DeliveryRow,
            subscription_id=sub.id,
            event_id=ev.id,
            url=sub.callback_webhook,
            body=json.dumps(body, separators=(",", ":")),
            status="pending",
            attempts=0,
            next_attempt_at=now,
            last_error=None,
            created_at=now,
            finished_at=None,
        )


# --- appliers ----------------------------------------------------------------------------------


def apply_subscription_created(
    session: Session, env: Envelope, limits: ProjectionLimits
) -> Applied:
    """Record a subscription (its owner node delivers its events)."""
    p = env.payload
    if session.get(SubscriptionRow, p["subscription_id"]) is None:
        session.add(
            SubscriptionRow(
                id=p["subscription_id"],
                subscriber_id=p["subscriber_id"],
                event_types=list(p["event_types"]),
                filter_address=p.get("filter_address"),
                callback_webhook=p.get("callback_webhook"),
                node_id=env.origin,
                session_id=p["session_id"],
                status="active",
                created_at=env.timestamp,
                projects=_check_names(p["projects"], "projects")
                if p.get("projects") is not None
                else None,
            )
        )
    return Applied({"ok": True})


def _drop(session: Session, ids: list[str]) -> None:
    """Delete subscriptions with what their owner node recorded for them (events, queue)."""
    if not ids:
        return
    session.flush()
    for model in (EventRow, DeliveryRow):
        session.execute(delete(model).where(model.subscription_id.in_(ids)))
    session.execute(delete(SubscriptionRow).where(SubscriptionRow.id.in_(ids)))


def apply_subscription_removed(
    session: Session, env: Envelope, limits: ProjectionLimits
) -> Applied:
    """Remove one subscription (its owner asked, or an admin); the origin checked who may."""
    p = env.payload
    subscription_id = _text(p["subscription_id"], 64, "subscription_id")
    _text(p.get("reason", "removed"), 500, "reason")
    if session.get(SubscriptionRow, subscription_id) is None:
        return Applied({"ok": False, "reason": "not found"})
    _drop(session, [subscription_id])
    return Applied({"ok": True, "removed": [subscription_id]})


def apply_subscription_ended(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """End the origin's subscriptions without a webhook: of a session, of agents, or all."""
    p = env.payload
    session_id = _optional_text(p.get("session_id"), NAME_LENGTH, "session_id")
    agent_ids = p.get("agent_ids")
    query = select(SubscriptionRow.id).where(
        SubscriptionRow.node_id == env.origin, SubscriptionRow.callback_webhook.is_(None)
    )
    if session_id is not None:
        query = query.where(SubscriptionRow.session_id == session_id)
    if agent_ids is not None:
        query = query.where(SubscriptionRow.subscriber_id.in_(_check_names(agent_ids, "agent_ids")))
    ended = sorted(session.scalars(query))
    _drop(session, ended)
    return Applied({"ok": True, "ended": len(ended)})


def apply_subscription_dead(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Mark a webhook subscription dead (its URL failed for ``webhooks.max_age``): it matches
    no more events, and its owner's pending deliveries become dead letters. Only the node that
    delivers for it says so."""
    p = env.payload
    subscription_id = _text(p["subscription_id"], 64, "subscription_id")
    _text(p.get("reason", "failing"), 500, "reason")
    row = session.get(SubscriptionRow, subscription_id)
    if row is None or row.node_id != env.origin or row.callback_webhook is None:
        return Applied({"ok": False, "reason": "not a webhook subscription of the origin"})
    if row.status == "dead":
        return Applied({"ok": True, "dead": subscription_id, "already": True})
    row.status = "dead"
    session.flush()
    session.execute(
        update(DeliveryRow)
        .where(DeliveryRow.subscription_id == subscription_id, DeliveryRow.status == "pending")
        .values(status="dead", finished_at=env.timestamp)
    )
    return Applied({"ok": True, "dead": subscription_id})


SUBSCRIPTION_APPLIERS: dict[str, Applier] = {
    kind: _strict_json(fn)
    for kind, fn in {
        "subscription.created": apply_subscription_created,
        "subscription.removed": apply_subscription_removed,
        "subscription.ended": apply_subscription_ended,
        "subscription.dead": apply_subscription_dead,
    }.items()
}
