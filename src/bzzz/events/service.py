"""bzzz_subscribe: subscriptions to network events and the events they collected."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from ulid import ULID

from bzzz import domain
from bzzz.access.keys import STATELESS, handle_key, holder_of
from bzzz.address import parse_address
from bzzz.domain import EVENT_TYPES, iso
from bzzz.errors import InvalidParameters, PermissionDenied, RateLimited
from bzzz.eventlog import Caller, EventLog
from bzzz.events.records import no_subscription, redrive, removal_payload
from bzzz.events.targets import TargetPolicy
from bzzz.principal import Scope
from bzzz.schemas import SubscribeInput
from bzzz.store.database import Database
from bzzz.store.repository import Repository
from bzzz.store.subscription_repository import SubscriptionRepository

SUBSCRIPTION_URI = "bzzz://subscriptions/{subscription_id}"


def subscription_uri(subscription_id: str) -> str:
    """The MCP resource URI of a subscription's events."""
    return SUBSCRIPTION_URI.format(subscription_id=subscription_id)


def webhook_secret(node_secret: bytes, subscription_id: str) -> str:
    """The per-subscription HMAC key (derived, so it never travels the network)."""
    return hmac.new(node_secret, subscription_id.encode(), hashlib.sha256).hexdigest()


def maker_key(caller: Caller) -> str | None:
    """The key a subscription's maker holds it under: its session (an MCP session, a stdio
    process, a credential's sessionless calls), or for a sessionless call without a
    credential the ``agent_handle`` it passed. None: a call that names no maker."""
    if caller.session_id != STATELESS:
        return caller.session_id
    if caller.handle:
        return handle_key(caller.handle)
    return None


def may_end(caller: Caller, sub: domain.Subscription) -> bool:
    """Whether ``caller`` may end ``sub``: its maker, or a named admin of its projects.

    Every caller of a node without credentials is the anonymous admin, and every MCP client
    of a stdio process the local user: counted as admins here, any such client would end
    every other's subscriptions (the local user has ``bzzz subscriptions delete``).
    """
    key = maker_key(caller)
    if key is not None and key == sub.session_id:
        return True
    who = caller.principal
    if not who.authenticated:
        return False
    if sub.projects is None:
        return who.is_admin_of(None)
    return all(who.is_admin_of(project) for project in sub.projects)


def _event_types(given: list[str] | None) -> list[str]:
    if not given:
        raise InvalidParameters(
            "event_types is required to subscribe (at least one)",
            details={"field": "event_types", "valid": list(EVENT_TYPES)},
        )
    unknown = [t for t in given if t not in EVENT_TYPES]
    if unknown:
        raise InvalidParameters(
            f"unknown event type(s): {', '.join(unknown[:5])}; valid: {', '.join(EVENT_TYPES)}",
            details={"field": "event_types", "unknown": unknown[:16], "valid": list(EVENT_TYPES)},
        )
    return list(dict.fromkeys(given))


class SubscriptionService:
    """Creates and removes subscriptions, ends them with their sessions, reads what they got.

    ``loopback_only`` says that the node serves loopback alone (its HTTP bind host is a
    loopback address, or it serves stdio): then, as with ``allow_private``, webhooks may call
    loopback and private receivers.
    """

    def __init__(
        self,
        db: Database,
        log: EventLog,
        node_secret: bytes,
        *,
        allow_private: bool = False,
        loopback_only: bool = False,
        per_agent: int = 0,
        per_principal: int = 0,
    ) -> None:
        self._db = db
        self._log = log
        self._node_secret = node_secret
        # Quotas (0: none): one agent or one credential cannot fill the node with subscriptions.
        self._per_agent = per_agent
        self._per_principal = per_principal
        self.targets = TargetPolicy(allow_private=allow_private, loopback_only=loopback_only)

    async def subscribe(
        self, caller: Caller, params: SubscribeInput, subscriber_id: str | None = None
    ) -> dict[str, Any]:
        """Subscribe this session to event types (filtered, pushed to a webhook), or unsubscribe."""
        if params.action == "unsubscribe":
            return await self.unsubscribe(caller, params)
        if params.subscription_id is not None:
            raise InvalidParameters(
                "subscription_id is for action 'unsubscribe'", details={"field": "subscription_id"}
            )
        webhook = params.callback_webhook
        if webhook is not None:
            # A webhook is a lasting side effect (deliveries queued until it is removed):
            # 'read' follows events in resources and streams only.
            caller.principal.require(Scope.WRITE, "a webhook subscription (callback_webhook)")
        event_types = _event_types(params.event_types)
        if params.filter_address:
            parse_address(params.filter_address)
        if webhook is not None:
            self.targets.check_url(webhook)
        maker = maker_key(caller)
        await self._check_quota(caller, subscriber_id, maker)
        subscription_id = f"sub-{ULID()}"
        await self._log.emit(
            "subscription.created",
            "sub",
            subscription_id,
            {
                "subscription_id": subscription_id,
                "subscriber_id": subscriber_id or f"session:{maker or STATELESS}",
                "event_types": event_types,
                "filter_address": params.filter_address,
                "callback_webhook": webhook,
                # Who may end it (with the admins of its projects): see may_end.
                "session_id": maker or STATELESS,
                # A subscriber sees only its projects' events, on every node that matches.
                "projects": None
                if caller.principal.all_projects
                else sorted(caller.principal.projects),
            },
        )
        result: dict[str, Any] = {
            "success": True,
            "subscription_id": subscription_id,
            "event_types": event_types,
            "filter_address": params.filter_address,
            "subscribed_at": iso(domain.utcnow()),
            "status": "active",
            "resource_uri": subscription_uri(subscription_id),
        }
        if webhook:
            result["callback_webhook"] = webhook
            result["webhook_secret"] = webhook_secret(self._node_secret, subscription_id)
            result["signature_header"] = "X-Bzzz-Signature: t=<unix>,v1=<hex hmac-sha256 of "
            result["signature_header"] += "'<t>.<body>'>"
        return result

    async def _check_quota(
        self, caller: Caller, subscriber_id: str | None, maker: str | None
    ) -> None:
        # (limit name, limit, session key, agent): a session key counts a principal's, a
        # session's or a handle's subscriptions, an agent those it holds.
        checks: list[tuple[str, int, str | None, str | None]] = []
        if self._per_agent and subscriber_id is not None:
            checks.append(("subscriptions_per_agent", self._per_agent, None, subscriber_id))
        if self._per_principal and maker is not None:
            checks.append(("subscriptions_per_principal", self._per_principal, maker, None))
        async with self._db.session() as session:
            repo = SubscriptionRepository(session)
            for limit_name, limit, session_id, agent in checks:
                held = await repo.count_active(session_id=session_id, subscriber_id=agent)
                if held >= limit:
                    raise RateLimited(
                        f"{held} active subscriptions already (at most {limit}); "
                        "unsubscribe one first",
                        details={"limit": limit_name, "retry_after": 60},
                    )

    async def unsubscribe(self, caller: Caller, params: SubscribeInput) -> dict[str, Any]:
        """Remove a subscription: its maker's, or as an admin of its projects (a webhook one
        lives until removed)."""
        extra = [
            name
            for name in ("event_types", "filter_address", "callback_webhook")
            if getattr(params, name) is not None
        ]
        if params.subscription_id is None or extra:
            raise InvalidParameters(
                "unsubscribe takes subscription_id alone",
                details={"field": "subscription_id", "unexpected": extra},
            )
        sub = await self._subscription(params.subscription_id)
        if not may_end(caller, sub):
            raise PermissionDenied(
                f"subscription '{sub.id}' belongs to another {holder_of(caller)}; only its maker "
                "(the same session, credential or agent_handle) or an admin of its projects "
                "removes it",
                details={"subscription_id": sub.id, "missing": "subscription_owner"},
            )
        await self.remove(sub.id, caller.session_id, "unsubscribed")
        return {
            "success": True,
            "subscription_id": sub.id,
            "event_types": sub.event_types,
            "filter_address": sub.filter_address,
            "callback_webhook": sub.callback_webhook,
            "status": "removed",
        }

    async def remove(self, subscription_id: str, session_id: str | None, reason: str) -> None:
        """Remove a subscription from the network (checks of who may are the caller's)."""
        outcome = await self._log.emit(
            "subscription.removed",
            "sub",
            subscription_id,
            removal_payload(subscription_id, session_id, reason),
        )
        if not outcome["ok"]:
            raise no_subscription(subscription_id)

    async def mark_dead(self, subscription_id: str, reason: str) -> bool:
        """Mark a webhook subscription of this node dead (the dispatcher: its URL has failed
        for ``webhooks.max_age``); True when this call marked it."""
        outcome = await self._log.emit(
            "subscription.dead",
            "sub",
            subscription_id,
            {"subscription_id": subscription_id, "reason": reason[:500]},
        )
        return bool(outcome.get("ok")) and not outcome.get("already")

    async def end_for_session(self, session_id: str, reason: str = "session ended") -> int:
        """End this node's subscriptions without a webhook that ``session_id`` made."""
        return await self._end({"session_id": session_id}, reason)

    async def end_for_agents(self, agent_ids: list[str], reason: str = "lease ended") -> int:
        """End this node's subscriptions without a webhook made by (one of) these agents."""
        if not agent_ids:
            return 0
        return await self._end({"agent_ids": sorted(set(agent_ids))}, reason)

    async def end_all(self, reason: str = "node stopped") -> int:
        """End every subscription without a webhook of this node (its sessions are gone)."""
        return await self._end({}, reason)

    async def _end(self, scope: dict[str, Any], reason: str) -> int:
        async with self._db.session() as session:
            owned = await SubscriptionRepository(session).ending_subscriptions(
                self._log.node_id, scope.get("session_id"), scope.get("agent_ids")
            )
        if not owned:
            return 0  # nothing to end: no envelope
        outcome = await self._log.emit(
            "subscription.ended",
            "sub",
            self._log.node_id,
            {"session_id": None, "agent_ids": None} | scope | {"reason": reason},
        )
        return int(outcome.get("ended", 0))

    async def _subscription(self, subscription_id: str) -> domain.Subscription:
        async with self._db.session() as session:
            sub = await Repository(session).subscription(subscription_id)
        if sub is None:
            raise no_subscription(subscription_id)
        return sub

    async def subscriptions(self, limit: int = 1000) -> list[domain.Subscription]:
        """The network's subscriptions, newest first."""
        async with self._db.session() as session:
            return await SubscriptionRepository(session).subscriptions(limit)

    async def events(
        self, caller: Caller, subscription_id: str, limit: int = 100
    ) -> dict[str, Any]:
        """A subscription and its most recent events (oldest first): its subscriber's only."""
        async with self._db.session() as session:
            repo = Repository(session)
            sub = await repo.subscription(subscription_id)
            mine = sub is not None and (
                maker_key(caller) == sub.session_id or caller.principal.is_admin_of(None)
            )
            if sub is None or sub.node_id != self._log.node_id or not mine:
                raise InvalidParameters(
                    f"no subscription '{subscription_id}' on this node",
                    details={"subscription_id": subscription_id},
                )
            events = await repo.subscription_events(subscription_id, limit)
        return {
            "subscription_id": sub.id,
            "event_types": sub.event_types,
            "filter_address": sub.filter_address,
            "callback_webhook": sub.callback_webhook,
            "events": [body | {"sequence": seq} for seq, body in events],
        }

    async def deliveries(
        self, status: str | None = None, limit: int = 100
    ) -> list[domain.Delivery]:
        """Webhook deliveries of this node (pending, delivered, dead)."""
        async with self._db.session() as session:
            return await Repository(session).deliveries(status, limit)

    async def delivery_views(
        self, status: str | None = None, limit: int = 100, *, detailed: bool = False
    ) -> list[dict[str, Any]]:
        """Deliveries as a caller may see them: the error in full for admins only."""
        return [delivery_view(d, detailed=detailed) for d in await self.deliveries(status, limit)]

    async def redrive(self, delivery_ids: list[int] | None) -> list[int]:
        """Queue dead-lettered deliveries again (all when ``delivery_ids`` is None)."""
        async with self._db.session() as session:
            return await redrive(SubscriptionRepository(session), delivery_ids)


# What a non-admin reads of a failed delivery: "refused", "timeout" or a status would tell
# which ports of the receiver's network answer.
GENERIC_DELIVERY_ERROR = "delivery failed"


def delivery_view(delivery: domain.Delivery, *, detailed: bool) -> dict[str, Any]:
    """A delivery as JSON; ``detailed`` (admins) shows the stored error, others a generic one."""
    error = delivery.last_error
    if error is not None and not detailed:
        error = GENERIC_DELIVERY_ERROR
    return {
        "id": delivery.id,
        "subscription_id": delivery.subscription_id,
        "event_id": delivery.event_id,
        "url": delivery.url,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "next_attempt_at": iso(delivery.next_attempt_at),
        "last_error": error,
        "created_at": iso(delivery.created_at),
        "finished_at": iso(delivery.finished_at),
    }
