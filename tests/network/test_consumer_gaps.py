"""Deliveries the client dropped (a slow consumer) are consumed again: none is lost.

nats-py drops what arrives past a subscription's pending limit; with AckPolicy.ALL the ack of a
later message would cover the dropped ones for good. A tiny limit on a real nats-server makes
the client drop most of a burst.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import nats
import pytest

from bzzz.network import deliveries
from bzzz.network.base import BusMessage
from bzzz.network.jetstream import JetStreamBus

pytestmark = pytest.mark.integration

TOTAL = 300


async def _store_and_consume(bus: JetStreamBus, network: str) -> list[int]:
    """Store TOTAL envelopes, then consume them as the node does: the sequences handled, in
    the order handled (bounded: far below the server's own resend after ACK_WAIT)."""
    seen: list[int] = []
    everything = asyncio.Event()

    async def handler(batch: Sequence[BusMessage]) -> None:
        seen.extend(msg.seq for msg in batch)
        if len(set(seen)) >= TOTAL:
            everything.set()

    await bus.start()
    try:
        for n in range(TOTAL):
            await bus.store(f"bzzz.{network}.node.n{n}", f"fact {n}".encode(), f"id-{n}")
        consuming = asyncio.create_task(bus.consume(f"{network}-node", handler))
        try:
            async with asyncio.timeout(60):
                await everything.wait()
        finally:
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consuming
    finally:
        await bus.close()
    return seen


async def test_every_envelope_reaches_the_handler_although_the_client_dropped_deliveries(
    nats_url: str,
) -> None:
    bus = JetStreamBus([nats_url], "gaps")
    bus.pending_msgs_limit = 10  # a burst of 300 overflows it at once
    seen = await _store_and_consume(bus, "gaps")

    assert sorted(set(seen)) == list(range(1, TOTAL + 1))
    # The client did drop deliveries, and they came again.
    assert bus.consumer_restarts["dropped"] >= 1
    assert seen == sorted(seen)  # in log order, each once: nothing after a gap was handled


async def test_deliveries_lost_with_nothing_after_them_are_consumed_again(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last deliveries of a burst vanish on the way (as with a dropped connection): no
    later one shows a gap, and the server would send them again only after ACK_WAIT. The node
    sees its consumer delivered more than it received and consumes again from its store."""
    monkeypatch.setattr(deliveries, "CONSUMER_CHECK", 0.5)
    lost_from = TOTAL - 5
    made = deliveries.NodeConsumer._subscribe
    vanished: list[int] = []

    async def lossy_first(self: deliveries.NodeConsumer, start_seq: int) -> object:
        sub = await made(self, start_seq)
        if vanished:  # only the first consumer loses deliveries
            return sub
        queue = sub._pending_queue
        put = queue.put_nowait

        def put_or_lose(msg: nats.aio.msg.Msg) -> None:
            if msg.metadata.sequence.stream > lost_from and msg.metadata.num_delivered == 1:
                vanished.append(msg.metadata.sequence.stream)
                return
            put(msg)

        queue.put_nowait = put_or_lose
        return sub

    monkeypatch.setattr(deliveries.NodeConsumer, "_subscribe", lossy_first)
    bus = JetStreamBus([nats_url], "tail")
    seen = await _store_and_consume(bus, "tail")

    assert vanished == list(range(lost_from + 1, TOTAL + 1))
    assert deliveries.ACK_WAIT > 60
    assert seen == list(range(1, TOTAL + 1))  # in log order, each once
    assert bus.consumer_restarts == {"dropped": 1, "lost": 0}


class _Delivery:
    """A delivery as Acks sees it: its acks are publishes to its reply subject."""

    def __init__(self) -> None:
        self.reply = "$JS.ACK.stub"
        self._client = self
        self.acks = 0
        self.twice = asyncio.Event()

    async def publish(self, subject: str, payload: bytes = b"") -> None:
        assert subject == self.reply
        self.acks += 1
        if self.acks >= 2:
            self.twice.set()

    async def ack(self) -> None:
        # As nats-py's Msg.ack: a second ack of one message is refused.
        if self.acks:
            raise nats.errors.Error("message was already acknowledged")
        await self.publish(self.reply)


async def test_an_idle_consumer_acknowledges_its_newest_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost ack does not hold a full window until the server's ack_wait: an idle node sends
    its newest ack again."""
    monkeypatch.setattr(deliveries, "ACK_AGAIN", 0.05)
    acks = deliveries.Acks()
    delivery = _Delivery()
    await acks.handled(delivery, deliveries.ACK_EVERY)  # type: ignore[arg-type]
    assert delivery.acks == 1
    running = asyncio.create_task(acks.run())
    try:
        async with asyncio.timeout(10):
            await delivery.twice.wait()
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_the_nodes_consumer_is_paced_by_acks_as_configured(nats_url: str) -> None:
    """The server holds the node's consumer to MAX_ACK_PENDING and resends after ACK_WAIT."""
    bus = JetStreamBus([nats_url], "gaps")
    await bus.start()

    async def handler(batch: Sequence[BusMessage]) -> None:
        return None

    try:
        consuming = asyncio.create_task(bus.consume("gaps-slow", handler))
        nc = bus.client
        info = None
        async with asyncio.timeout(30):
            while info is None:  # the consumer is made by the task: ask until it is there
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    info = await nc.jetstream().consumer_info(bus.stream, "gaps-slow")
                await asyncio.sleep(0.05)
        consuming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consuming
    finally:
        await bus.close()
    assert info.config.ack_wait == deliveries.ACK_WAIT
    assert info.config.max_ack_pending == deliveries.MAX_ACK_PENDING


# Looks at the consumer in turn, the node awaiting its delivery 10: (a delivery came just
# before, the consumer's last delivered sequence, anything in the client's buffer, lost?).
_LOOKS = [
    # Everything delivered was received: never.
    (False, 9, False, False),
    (False, 9, False, False),
    # Delivered past what came, the buffer empty: once may be on the wire; twice is lost.
    (False, 12, False, False),
    (False, 12, False, True),
    # Still waiting in the client's buffer: not lost.
    (True, 12, True, False),
    (False, 12, True, False),
    # The count still moving: the server is sending.
    (False, 12, False, False),
    (False, 15, False, False),
    (False, 15, False, True),
    # A delivery between two looks starts the count again.
    (True, 15, False, False),
    (True, 15, False, False),
]


def test_deliveries_count_as_unreceived_only_when_seen_missing_twice_unchanged() -> None:
    unreceived = deliveries.Unreceived()
    seen = []
    for came, delivered, buffered, _ in _LOOKS:
        if came:
            unreceived.reset()
        seen.append(unreceived.check(delivered=delivered, expected=10, buffered=buffered))
    assert seen == [lost for *_, lost in _LOOKS]
