"""Network latency between nodes: a signed ping/pong with each peer, timed on this node's clock.

Every heartbeat interval a node pings up to ``PINGS_PER_ROUND`` of the peers it hears, those
measured least first, on the peer's own subject (core NATS request/reply, off the log): each
pair of nodes is measured, and a network of N nodes costs ~8·N pings an interval, not N².
Ping and pong are signed envelopes (``node.ping``, ``node.pong``); a node answers only the pings
of nodes admitted to the network (``bzzz.admission``) and signed by a trusted key, and counts a
pong only from the peer it pinged, carrying its own nonce. The round trip is timed with
``time.perf_counter`` on the pinging node: no two clocks are compared.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bzzz.errors import BzzzError
from bzzz.network.base import Bus, ping_subject
from bzzz.network.envelope import EnvelopeRejected, open_envelope, seal
from bzzz.network.identity import NodeIdentity

logger = logging.getLogger(__name__)

PING = "node.ping"
PONG = "node.pong"
# Upper bounds (seconds) of the latency histograms: 0.5 ms to 2.5 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
MEASURED = (
    "round trip of a signed ping/pong between this node and the peer over NATS request/reply, "
    "on this node's monotonic clock, every heartbeat interval"
)

# Peers pinged each heartbeat interval, at most: pinging all of them costs the network N·(N-1)
# signed pings an interval (~200,000/s for 1,000 nodes at 5 s).
PINGS_PER_ROUND = 8

Admits = Callable[[str, str], bool]


@dataclass(slots=True)
class RoundTrips:
    """One peer's measured round trips: the last, their count and sum, cumulative buckets."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    count: int = 0
    total: float = 0.0
    last: float | None = None
    timeouts: int = 0

    def observe(self, seconds: float) -> None:
        """Count one round trip."""
        self.count += 1
        self.total += seconds
        self.last = seconds
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1

    @property
    def last_ms(self) -> float | None:
        """The last round trip in milliseconds."""
        return round(self.last * 1000, 3) if self.last is not None else None

    @property
    def mean_ms(self) -> float | None:
        """The mean round trip in milliseconds."""
        return round(self.total / self.count * 1000, 3) if self.count else None

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON."""
        return {
            "last_ms": self.last_ms,
            "mean_ms": self.mean_ms,
            "samples": self.count,
            "timeouts": self.timeouts,
        }


class Pinger:
    """Pings peers and answers their pings; keeps each peer's round trips."""

    def __init__(
        self,
        bus: Bus,
        identity: NodeIdentity,
        network: str,
        *,
        trusted: frozenset[str] | None,
        admits: Admits | None,
        timeout: float,
    ) -> None:
        self._bus = bus
        self._identity = identity
        self._network = network
        self._trusted = trusted
        self._admits = admits
        self.timeout = timeout
        self.round_trips: dict[str, RoundTrips] = {}
        self.refused = 0
        self._measured = asyncio.Condition()

    def _seal(self, type_: str, to: str, nonce: str) -> bytes:
        subject = ping_subject(self._network, to)
        payload = {"to": to, "nonce": nonce}
        return seal(self._identity, self._network, type_, subject, payload).to_bytes()

    def _open(self, data: bytes, type_: str) -> tuple[str, str, dict[str, Any]]:
        """(origin, origin key, payload) of a verified ping or pong addressed to this node."""
        env = open_envelope(data, self._network, self._trusted)
        if env.type != type_ or env.payload.get("to") != self._identity.node_id:
            raise EnvelopeRejected("malformed")
        if self._admits is not None and not self._admits(env.origin_key, env.origin):
            raise EnvelopeRejected("not_admitted")
        return env.origin, env.origin_key, env.payload

    async def answer(self, data: bytes) -> bytes | None:
        """The pong to a ping, or None (unanswered) for anything not from an admitted node."""
        try:
            origin, _, payload = self._open(data, PING)
        except EnvelopeRejected as exc:
            self.refused += 1
            logger.debug("left a ping unanswered: %s", exc.reason)
            return None
        return self._seal(PONG, origin, str(payload.get("nonce", ""))[:64])

    async def ping(self, peer_id: str) -> float | None:
        """Time one round trip to ``peer_id`` (seconds), or None when it did not answer."""
        trips = self.round_trips.setdefault(peer_id, RoundTrips())
        elapsed = await self._time(peer_id)
        if elapsed is None:
            trips.timeouts += 1
        else:
            trips.observe(elapsed)
        async with self._measured:
            self._measured.notify_all()
        return elapsed

    async def _time(self, peer_id: str) -> float | None:
        nonce = secrets.token_hex(8)
        data = self._seal(PING, peer_id, nonce)
        started = time.perf_counter()
        try:
            answer = await self._bus.ping(peer_id, data, self.timeout)
            elapsed = time.perf_counter() - started
            origin, _, payload = self._open(answer, PONG)
        except EnvelopeRejected as exc:
            logger.warning("dropped the pong of %s: %s", peer_id, exc.reason)
            return None
        except BzzzError as exc:
            logger.debug("no pong from %s: %s", peer_id, exc)
            return None
        if origin != peer_id or payload.get("nonce") != nonce:
            logger.warning("dropped a pong for %s that answers another ping", peer_id)
            return None
        return elapsed

    async def round(self, peer_ids: Iterable[str], most: int = PINGS_PER_ROUND) -> None:
        """Ping at once the ``most`` peers of ``peer_ids`` tried least so far (a new peer first)."""

        me = self._identity.node_id

        def tried(peer_id: str) -> tuple[int, int]:
            # Ties broken differently on each node: nodes that started together do not all
            # ping the same few peers each round.
            trips = self.round_trips.get(peer_id)
            return (trips.count + trips.timeouts if trips is not None else 0), hash((me, peer_id))

        chosen = sorted(peer_ids, key=tried)[:most]
        await asyncio.gather(*(self.ping(peer_id) for peer_id in chosen))

    def forget(self, peer_id: str) -> None:
        """Drop a peer's figures (it left the board)."""
        self.round_trips.pop(peer_id, None)

    def summary(self, limit: int = 64) -> dict[str, float]:
        """The last round trip (ms) to each measured peer, for this node's heartbeat."""
        measured = {p: t.last_ms for p, t in sorted(self.round_trips.items())}
        return dict([(p, ms) for p, ms in measured.items() if ms is not None][:limit])

    async def wait_for(self, predicate: Callable[[dict[str, RoundTrips]], bool]) -> None:
        """Wait until the measurements satisfy ``predicate`` (bound it with a timeout)."""
        async with self._measured:
            await self._measured.wait_for(lambda: predicate(self.round_trips))
