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


BatchHandler = Callable[[Sequence[BusMessage]], Awaitable[None]]


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
