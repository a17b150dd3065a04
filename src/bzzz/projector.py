"""The projector: consumes the network's log, verifies each envelope, applies it to the store.

The origin of an envelope waits here (``submit``) until its own projection applied it, so a
client always reads its own writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import event as sa_event
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.address import parse_address
from bzzz.errors import BzzzError, NetworkError
from bzzz.network.base import Bus, BusMessage
from bzzz.network.envelope import Envelope, EnvelopeRejected, open_envelope
from bzzz.store.database import Database
from bzzz.store.directory import AgentDirectory
from bzzz.store.models import AgentRow, AppliedEnvelope, DeliveryRow, EventRow
from bzzz.store.projection import APPLIERS, Applied, Outcome, ProjectionLimits
from bzzz.store.repository import Repository, agent_from_row

logger = logging.getLogger(__name__)

EventListener = Callable[[Sequence[tuple[domain.Subscription, domain.Event]]], Awaitable[None]]


def subscription_matches(sub: domain.Subscription, event: domain.Event) -> bool:
    """True when the event is of a subscribed type and inside the filter address."""
    if event.type not in sub.event_types:
        return False
    if not sub.filter_address:
        return True
    try:
        return parse_address(sub.filter_address).covers(parse_address(event.address))
    except BzzzError:
        return False


_TOUCHED = "bzzz_touched_agents"


@sa_event.listens_for(Session, "before_flush")
def _track_agents(session: Session, _context: Any, _instances: Any) -> None:
    """Keep (strongly) every agent row a projection flush writes, for the directory."""
    if "bzzz_projection" not in session.info:
        return
    touched = session.info.setdefault(_TOUCHED, {})
    for obj in (*session.new, *session.dirty):
        if isinstance(obj, AgentRow):
            touched[obj.id] = obj


class Projector:
    """Applies the log to the store and answers origins waiting for their envelopes."""

    def __init__(
        self,
        db: Database,
        bus: Bus,
        *,
        network: str,
        node_id: str,
        limits: ProjectionLimits,
        apply_timeout: float = 15.0,
    ) -> None:
        self._db = db
        self._bus = bus
        self._network = network
        self._node_id = node_id
        self._limits = limits
        self._apply_timeout = apply_timeout
        self._waiting: dict[str, asyncio.Future[Outcome]] = {}
        self._subscriptions: list[domain.Subscription] | None = None
        self._listeners: list[EventListener] = []
        self._applied_seq = 0
        self._progress = asyncio.Condition()
        self.directory = AgentDirectory()
        self.rejected: Counter[str] = Counter()
        self.applied_count = 0

    @property
    def durable(self) -> str:
        """This node's durable consumer name."""
        return f"node_{self._node_id.replace('-', '_')}"

    @property
    def applied_sequence(self) -> int:
        """The highest log sequence applied so far."""
        return self._applied_seq

    def add_listener(self, listener: EventListener) -> None:
        """Call ``listener`` after each commit with the (subscription, event) pairs it matched."""
        self._listeners.append(listener)

    async def load_directory(self) -> None:
        """Fill the agent directory from the store (before consuming the log)."""
        async with self._db.session() as session:
            self.directory.load(await Repository(session).all_agents())

    async def run(self) -> None:
        """Consume the log until cancelled."""
        await self._bus.consume(self.durable, self._apply_batch)

    async def wait_for_sequence(self, seq: int, within: float) -> None:
        """Wait until the log is applied up to ``seq`` (start-up catch-up, tests)."""
        async with asyncio.timeout(within), self._progress:
            await self._progress.wait_for(lambda: self._applied_seq >= seq)

    async def submit(self, envelope: Envelope) -> Outcome:
        """Publish an envelope and return its outcome once this node has applied it."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting[envelope.id] = future
        try:
            await self._bus.publish(envelope.subject, envelope.to_bytes(), envelope.id)
            async with asyncio.timeout(self._apply_timeout):
                return await future
        except TimeoutError as exc:
            raise NetworkError(
                "the network stored the change but this node has not applied it yet; "
                "read again shortly",
                details={"envelope_id": envelope.id},
            ) from exc
        finally:
            self._waiting.pop(envelope.id, None)

    # --- applying ----------------------------------------------------------------------------

    def _open(self, messages: Sequence[BusMessage]) -> list[tuple[Envelope, int]]:
        opened = []
        for msg in messages:
            try:
                opened.append((open_envelope(msg.data, self._network), msg.seq))
            except EnvelopeRejected as exc:
                self.rejected[exc.reason] += 1
                logger.warning("rejected envelope at seq %d: %s", msg.seq, exc.reason)
        return opened

    async def _apply_batch(self, messages: Sequence[BusMessage]) -> None:
        opened = self._open(messages)
        results: dict[str, Outcome] = {}
        matched: list[tuple[domain.Subscription, domain.Event]] = []
        async with self._db.session() as session:
            session.info["bzzz_projection"] = True
            repo = Repository(session)
            done = await repo.applied([env.id for env, _ in opened])
            results.update(done)
            if done:
                self.rejected["replayed"] += sum(
                    1 for env, _ in opened if env.id in done and env.id not in self._waiting
                )
            for env, seq in opened:
                if env.id in results:
                    continue
                applied = await self._apply_one(session, env)
                results[env.id] = applied.outcome
                session.add(
                    AppliedEnvelope(
                        id=env.id,
                        seq=seq,
                        type=env.type,
                        origin=env.origin,
                        outcome=applied.outcome,
                        applied_at=domain.utcnow(),
                    )
                )
                if env.type == "subscription.created":
                    self._subscriptions = None
                matched.extend(await self._match(session, applied.events))
            touched = await self._touched_agents(session)
        for agent in touched:
            self.directory.put(agent)
        self.applied_count += len(opened)
        await self._advance(messages[-1].seq if messages else 0)
        for env_id, outcome in results.items():
            future = self._waiting.get(env_id)
            if future is not None and not future.done():
                future.set_result(outcome)
        if matched:
            await self._notify(matched)

    @staticmethod
    async def _touched_agents(session: AsyncSession) -> list[domain.Agent]:
        await session.flush()
        rows: list[AgentRow] = list(session.info.pop(_TOUCHED, {}).values())
        for row in rows:
            # A rolled-back savepoint expires what it touched; reload before reading.
            if inspect(row).expired_attributes:
                await session.refresh(row)
        return [agent_from_row(row) for row in rows]

    async def _apply_one(self, session: AsyncSession, env: Envelope) -> Applied:
        applier = APPLIERS.get(env.type)
        if applier is None:
            self.rejected["unknown_type"] += 1
            return Applied({"ok": False, "reason": f"unknown envelope type {env.type}"})
        try:
            async with session.begin_nested():
                return await applier(session, env, self._limits)
        except (KeyError, TypeError, ValueError) as exc:
            # A malformed payload from a signed peer must not wedge the log: record and skip.
            self.rejected["bad_payload"] += 1
            logger.warning("envelope %s (%s) has a bad payload: %r", env.id, env.type, exc)
            return Applied({"ok": False, "reason": "bad payload"})

    async def _match(
        self, session: AsyncSession, events: list[domain.Event]
    ) -> list[tuple[domain.Subscription, domain.Event]]:
        if not events:
            return []
        if self._subscriptions is None:
            self._subscriptions = await Repository(session).subscriptions_of_node(self._node_id)
        matched = []
        for event in events:
            for sub in self._subscriptions:
                if subscription_matches(sub, event):
                    self._record(session, sub, event)
                    matched.append((sub, event))
        return matched

    @staticmethod
    def _record(session: AsyncSession, sub: domain.Subscription, event: domain.Event) -> None:
        body = event.to_json() | {"subscription_id": sub.id}
        session.add(
            EventRow(
                subscription_id=sub.id,
                event_id=event.id,
                event_type=event.type,
                payload=body,
                created_at=event.timestamp,
            )
        )
        if sub.callback_webhook:
            session.add(
                DeliveryRow(
                    subscription_id=sub.id,
                    event_id=event.id,
                    url=sub.callback_webhook,
                    body=json.dumps(body, separators=(",", ":")),
                    status="pending",
                    attempts=0,
                    next_attempt_at=domain.utcnow(),
                    last_error=None,
                    created_at=domain.utcnow(),
                    finished_at=None,
                )
            )

    async def _advance(self, seq: int) -> None:
        async with self._progress:
            self._applied_seq = max(self._applied_seq, seq)
            self._progress.notify_all()

    async def _notify(self, matched: list[tuple[domain.Subscription, domain.Event]]) -> None:
        for listener in self._listeners:
            try:
                await listener(matched)
            except Exception:
                # A listener (MCP notification, webhook wake-up) must never stop the log.
                logger.exception("event listener failed")

    def stats(self) -> dict[str, Any]:
        """Counters for /metrics and health."""
        return {
            "applied": self.applied_count,
            "applied_sequence": self._applied_seq,
            "rejected": dict(self.rejected),
        }
