"""The node's side of its durable consumer: acknowledging deliveries, finding dropped ones.

``Acks`` paces the server with few acknowledgements (AckPolicy.ALL); ``until_gap`` finds where
the consumer's own sequence jumps, the mark of deliveries the client dropped.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError
from nats.errors import Error as NatsError

logger = logging.getLogger(__name__)

ACK_EVERY = 1_000
ACK_AFTER = 0.2


class Acks:
    """Acknowledges a durable consumer's deliveries a few at a time.

    Acks only pace the server (``max_ack_pending``); where a node resumes comes from its store.
    With ``AckPolicy.ALL`` one ack covers everything before it, so the newest handled message
    is acknowledged every ``ACK_EVERY`` messages and ``ACK_AFTER`` seconds after it was
    handled: an ack per batch cost every lone post one more send to the server.
    """

    def __init__(self) -> None:
        self._newest: Msg | None = None
        self._count = 0

    async def handled(self, msg: Msg, count: int) -> None:
        """Note a handled batch ending at ``msg``; acknowledge now if many are waiting."""
        self._newest = msg
        self._count += count
        if self._count >= ACK_EVERY:
            await self.flush()

    async def flush(self) -> None:
        """Acknowledge everything handled so far."""
        newest, self._newest, self._count = self._newest, None, 0
        if newest is not None:
            await newest.ack()

    async def run(self) -> None:
        """Acknowledge what was handled, every ACK_AFTER seconds, until cancelled."""
        while True:
            await asyncio.sleep(ACK_AFTER)
            try:
                await self.flush()
            except (ConnectionClosedError, NatsError) as exc:
                # A lost ack costs nothing: a later one covers the same messages.
                logger.info("could not acknowledge the log's deliveries: %r", exc)


def until_gap(batch: list[Msg], expected: int) -> tuple[list[Msg], bool]:
    """The messages of ``batch`` before the first gap in the consumer's sequence, and
    whether there is one (a redelivery, at or before ``expected``, is no gap)."""
    for index, msg in enumerate(batch):
        delivered = int(msg.metadata.sequence.consumer)
        if delivered > expected:
            return batch[:index], True
        expected = max(expected, delivered + 1)
    return batch, False
