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


async def test_every_envelope_reaches_the_handler_although_the_client_dropped_deliveries(
    nats_url: str,
) -> None:
    bus = JetStreamBus([nats_url], "gaps")
    bus.pending_msgs_limit = 10  # a burst of 300 overflows it at once
    await bus.start()
    seen: list[int] = []
    everything = asyncio.Event()

    async def handler(batch: Sequence[BusMessage]) -> None:
        seen.extend(msg.seq for msg in batch)
        if len(set(seen)) >= TOTAL:
            everything.set()

    try:
        for n in range(TOTAL):
            await bus.store(f"bzzz.gaps.node.n{n}", f"fact {n}".encode(), f"id-{n}")
        consuming = asyncio.create_task(bus.consume("gaps-node", handler))
        try:
            async with asyncio.timeout(60):
                await everything.wait()
        finally:
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consuming
    finally:
        await bus.close()

    assert sorted(set(seen)) == list(range(1, TOTAL + 1))
    # The client did drop deliveries, and they came again.
    assert bus.consumer_restarts["dropped"] >= 1
    assert seen == sorted(seen)  # in log order, each once: nothing after a gap was handled


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
