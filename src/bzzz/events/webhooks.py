"""Webhook delivery: signed POSTs from a durable queue, retried with backoff, then dead-lettered.

A subscription whose URL has failed for ``webhooks.max_age`` (no delivery got through in that
time) is marked dead through ``on_dead``: it gets no new deliveries and its pending ones become
dead letters, so a receiver that is gone is not retried for ever.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import httpx

from bzzz import domain
from bzzz.backoff import backoff
from bzzz.config import WebhookSettings
from bzzz.errors import InvalidParameters
from bzzz.events.service import webhook_secret
from bzzz.events.targets import (
    IPAddress,
    Resolver,
    Target,
    TargetPolicy,
    parse_target,
    system_resolver,
)
from bzzz.store.database import Database
from bzzz.store.repository import Repository
from bzzz.store.subscription_repository import SubscriptionRepository

# Marks a subscription dead (its id, the last error); True when this call marked it.
OnDead = Callable[[str, str], Awaitable[bool]]

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Bzzz-Signature"


def _pinned_url(target: Target, address: IPAddress) -> str:
    """The URL that connects to the checked address (the Host header names the target)."""
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"{target.scheme}://{host}:{target.port}{target.path}"


def sign_body(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value: ``t=<unix>,v1=<hex HMAC-SHA256 of '<t>.<body>'>``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(secret: str, header: str, body: bytes, tolerance: float = 300.0) -> bool:
    """Check a signature header as a receiver would (timestamp within ``tolerance`` seconds)."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (ValueError, KeyError):
        return False
    if abs(time.time() - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign_body(secret, timestamp, body), header)


class WebhookDispatcher:
    """Works through the delivery queue until cancelled; ``wake`` when something is queued."""

    def __init__(
        self,
        db: Database,
        settings: WebhookSettings,
        node_secret: bytes,
        client: httpx.AsyncClient | None = None,
        *,
        targets: TargetPolicy | None = None,
        resolver: Resolver = system_resolver,
        on_dead: OnDead | None = None,
    ) -> None:
        self._db = db
        self._on_dead = on_dead
        self.targets = targets or TargetPolicy(
            allow_private=settings.allow_private, loopback_only=False
        )
        self.resolver = resolver  # tests stand in their own
        self._settings = settings
        self._node_secret = node_secret
        self._client = client
        self._wake = asyncio.Event()
        self._stopping = False
        self.delivered = 0
        self.failed_attempts = 0
        self.dead = 0
        self.dead_subscriptions = 0

    def stop(self) -> None:
        """Finish the current round and leave run() (cancelling mid-query upsets the pool)."""
        self._stopping = True
        self._wake.set()

    def wake(self) -> None:
        """Something was queued: look now."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver due items, then wait for a wake-up or the next due time."""
        owns = self._client is None
        client = self._client or httpx.AsyncClient(
            timeout=self._settings.timeout, follow_redirects=False
        )
        try:
            while not self._stopping:
                self._wake.clear()
                await self.deliver_due(client)
                if not self._stopping:
                    await self._wait()
        finally:
            if owns:
                await client.aclose()

    async def _wait(self) -> None:
        async with self._db.session() as session:
            due = await Repository(session).next_delivery_time()
        delay = 5.0 if due is None else (due - domain.utcnow()).total_seconds()
        if delay <= 0:
            return
        try:
            async with asyncio.timeout(min(delay, 5.0)):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def deliver_due(self, client: httpx.AsyncClient) -> int:
        """Attempt every due delivery once; returns how many were attempted."""
        async with self._db.session() as session:
            due = await Repository(session).due_deliveries(domain.utcnow(), limit=64)
        if due:
            await asyncio.gather(*(self._attempt(client, d) for d in due))
        return len(due)

    async def _attempt(self, client: httpx.AsyncClient, delivery: domain.Delivery) -> None:
        body = delivery.body.encode()
        secret = webhook_secret(self._node_secret, delivery.subscription_id)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign_body(secret, int(time.time()), body),
            "X-Bzzz-Delivery": str(delivery.id),
            "X-Bzzz-Event-Id": delivery.event_id,
            "User-Agent": "bzzz-webhooks/1",
        }
        try:
            target = parse_target(delivery.url)
            address, refusal = await self.targets.pin(target, self.resolver)
        except InvalidParameters as exc:
            await self._record(delivery, exc.message, permanent=True)
            return
        except (OSError, UnicodeError) as exc:
            # Unresolvable now: retried like any other failure.
            await self._record(delivery, f"cannot resolve {delivery.url}: {exc}"[:500])
            return
        if refusal is not None:
            await self._record(delivery, refusal, permanent=True)
            return
        error: str | None = None
        try:
            response = await client.post(
                _pinned_url(target, address),
                content=body,
                headers=headers | {"Host": target.authority},
                extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
            )
            if not 200 <= response.status_code < 300:
                error = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        await self._record(delivery, error)

    async def _record(
        self, delivery: domain.Delivery, error: str | None, *, permanent: bool = False
    ) -> None:
        now = domain.utcnow()
        if error is None:
            status, next_at, finished = "delivered", now, now
            self.delivered += 1
        elif permanent or self._expired(delivery.created_at, now):
            status, next_at, finished = "dead", now, now
            self.dead += 1
            logger.warning(
                "webhook delivery %d to %s dead-lettered after %d attempts: %s",
                delivery.id,
                delivery.url,
                delivery.attempts + 1,
                error,
            )
        else:
            status, finished = "pending", None
            next_at = now + timedelta(seconds=self._backoff(delivery.attempts))
            self.failed_attempts += 1
            logger.info(
                "webhook delivery %d failed (%s); retry at %s",
                delivery.id,
                error,
                next_at.isoformat(),
            )
        async with self._db.session() as session:
            await Repository(session).record_attempt(
                delivery.id,
                status=status,
                next_attempt_at=next_at,
                error=error,
                finished_at=finished,
            )
        if error is not None:
            await self._check_subscription(delivery, error, now)

    async def _check_subscription(
        self, delivery: domain.Delivery, error: str, now: datetime
    ) -> None:
        """Mark the subscription dead once its URL has failed for max_age."""
        if self._on_dead is None:
            return
        async with self._db.session() as session:
            since = await SubscriptionRepository(session).failing_since(delivery.subscription_id)
        if since is None or not self._expired(since, now):
            return
        if await self._on_dead(
            delivery.subscription_id, f"failing since {since.isoformat()}: {error}"
        ):
            self.dead_subscriptions += 1
            logger.warning(
                "webhook subscription %s is dead: %s has failed since %s (%s)",
                delivery.subscription_id,
                delivery.url,
                since.isoformat(),
                error,
            )

    def _expired(self, created: datetime, now: datetime) -> bool:
        return (now - created).total_seconds() >= self._settings.max_age

    def _backoff(self, attempts: int) -> float:
        # Jitter spreads retries of many deliveries to one receiver that just came back.
        s = self._settings
        return backoff(attempts, s.initial_backoff, s.max_backoff, jitter=True)
