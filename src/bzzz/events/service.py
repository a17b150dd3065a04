"""bzzz_subscribe: subscriptions to network events and the events they collected."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from ulid import ULID

from bzzz import domain
from bzzz.address import parse_address
from bzzz.domain import EVENT_TYPES, iso
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller, EventLog
from bzzz.schemas import SubscribeInput
from bzzz.store.database import Database
from bzzz.store.repository import Repository

SUBSCRIPTION_URI = "bzzz://subscriptions/{subscription_id}"


def subscription_uri(subscription_id: str) -> str:
    """The MCP resource URI of a subscription's events."""
    return SUBSCRIPTION_URI.format(subscription_id=subscription_id)


def webhook_secret(node_secret: bytes, subscription_id: str) -> str:
    """The per-subscription HMAC key (derived, so it never travels the network)."""
    return hmac.new(node_secret, subscription_id.encode(), hashlib.sha256).hexdigest()


def _check_webhook(url: str) -> str:
    # urlsplit silently drops CR/LF/TAB; a stored URL must be exactly what was checked.
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise InvalidParameters(
            "callback_webhook must not contain spaces or control characters",
            details={"field": "callback_webhook"},
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParameters(
            "callback_webhook must be an absolute http:// or https:// URL",
            details={"field": "callback_webhook"},
        )
    if parts.username or parts.password:
        raise InvalidParameters(
            "callback_webhook must not embed credentials", details={"field": "callback_webhook"}
        )
    return url


def _is_private_host(host: str) -> bool:
    """A literal non-public address or localhost (names are checked again at delivery)."""
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(
        ".localhost"
    ):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not address.is_global or address.is_multicast


class SubscriptionService:
    """Creates subscriptions and reads what they collected."""

    def __init__(
        self, db: Database, log: EventLog, node_secret: bytes, *, allow_private: bool = True
    ) -> None:
        self._db = db
        self._log = log
        self._node_secret = node_secret
        self._allow_private = allow_private

    async def subscribe(
        self, caller: Caller, params: SubscribeInput, subscriber_id: str | None = None
    ) -> dict[str, Any]:
        """Subscribe this session to event types, optionally filtered and pushed to a webhook."""
        unknown = [t for t in params.event_types if t not in EVENT_TYPES]
        if unknown:
            raise InvalidParameters(
                f"unknown event type(s): {', '.join(unknown[:5])}; valid: {', '.join(EVENT_TYPES)}",
                details={"unknown": unknown[:16], "valid": list(EVENT_TYPES)},
            )
        if params.filter_address:
            parse_address(params.filter_address)
        webhook = _check_webhook(params.callback_webhook) if params.callback_webhook else None
        if (
            webhook
            and not self._allow_private
            and _is_private_host(urlsplit(webhook).hostname or "")
        ):
            raise InvalidParameters(
                "callback_webhook points at a private address and webhooks.allow_private is off",
                details={"field": "callback_webhook"},
            )
        subscription_id = f"sub-{ULID()}"
        event_types = list(dict.fromkeys(params.event_types))
        await self._log.emit(
            "subscription.created",
            "sub",
            subscription_id,
            {
                "subscription_id": subscription_id,
                "subscriber_id": subscriber_id or f"session:{caller.session_id}",
                "event_types": event_types,
                "filter_address": params.filter_address,
                "callback_webhook": webhook,
                "session_id": caller.session_id,
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

    async def events(
        self, caller: Caller, subscription_id: str, limit: int = 100
    ) -> dict[str, Any]:
        """A subscription and its most recent events (oldest first): its subscriber's only."""
        async with self._db.session() as session:
            repo = Repository(session)
            sub = await repo.subscription(subscription_id)
            mine = sub is not None and (
                sub.session_id == caller.session_id or caller.principal.is_admin_of(None)
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
