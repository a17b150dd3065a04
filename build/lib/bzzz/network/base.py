"""The Bus protocol: the network's event log, as seen by a node.

A bus stores published envelopes durably (``publish`` returns once they are stored) and hands
every stored envelope, in log order, to each named durable consumer. Implementations:
``JetStreamBus`` (NATS JetStream, production) and ``InMemoryBus`` (unit tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class BusMessage:
    """One stored envelope as the bus delivers it."""

    subject: str
    data: bytes
    seq: int


@dataclass(frozen=True, slots=True)
class Stored:
    """Where the log holds a published envelope."""

    seq: int
    # The log held this msg_id already: ``seq`` is the earlier entry's, whose bytes may differ
    # from these (nodes that witness one fact publish it under one id, each signing its own).
    duplicate: bool = False


BatchHandler = Callable[[Sequence[BusMessage]], Awaitable[None]]
# A peer board change: (node id, its newest heartbeat) or (node id, None) when it was removed.
PeerHandler = Callable[[str, bytes | None], Awaitable[None]]


class Bus(Protocol):
    """A durable, ordered log shared by every node of a network."""

    async def start(self) -> None:
        """Connect and make sure the network's stream exists."""
        ...

    async def close(self) -> None:
        """Disconnect; idempotent."""
        ...

    async def publish(self, subject: str, data: bytes, msg_id: str) -> int:
        """Store one envelope; return its sequence once stored. Same ``msg_id`` = stored once."""
        ...

    async def store(self, subject: str, data: bytes, msg_id: str) -> Stored:
        """``publish``, and whether the log held ``msg_id`` already."""
        ...

    async def consume(self, durable: str, handler: BatchHandler, start_seq: int = 1) -> None:
        """Deliver the log to ``handler`` in batches, from ``start_seq`` on, in order.

        The node's store knows what it has applied, so it says where to start; ``durable`` names
        this node's consumer on the server. A batch is acknowledged when the handler returns;
        if it raises, the batch is delivered again. Runs until cancelled.
        """
        ...

    async def last_sequence(self) -> int:
        """The sequence of the newest stored envelope (0 when empty)."""
        ...

    # The peer board: each node's newest heartbeat, kept apart from the log (it is not history).

    async def put_peer(self, node_id: str, data: bytes) -> None:
        """Replace this node's entry on the network's peer board."""
        ...

    async def peer_entries(self) -> dict[str, bytes]:
        """The board as it is now: node id -> newest heartbeat."""
        ...

    async def watch_peers(self, handler: PeerHandler) -> None:
        """Hand every current entry, then every change, to ``handler``. Runs until cancelled."""
        ...

    # Other networks (federation): read their agents, post to them.

    async def follow(self, network: str, kinds: Sequence[str], handler: BatchHandler) -> None:
        """Deliver another network's log, only subjects of ``kinds``, from its start. Runs until
        cancelled; nothing is acknowledged (a follower keeps no position on that network)."""
        ...
