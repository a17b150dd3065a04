"""Deliveries the client dropped (a slow consumer) are consumed again: none is lost.

nats-py drops what arrives past a subscription's pending limit; with AckPolicy.ALL the ack of a
later message would cover the dropped ones for good. A tiny limit on a real nats-server makes
the client drop most of a burst.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import pytest

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
