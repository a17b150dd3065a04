"""A watch of the peer board leaves no consumer behind for long once it is made again, and
ends when cancelled.

A real nats-server: a node's watches of the board are made again and again (a quiet watch is
rebuilt, a reconnect makes it anew); each leaves a consumer on the server until the server
finds it unread. Those consumers must go within ``PEER_WATCH_GONE``, not after nats-py's
five minutes: on a busy 100-node cluster the rebuilt watches reached the server's limit of
consumers on the board, and nodes could no longer hear each other.
"""

from __future__ import annotations

import asyncio

import nats
import pytest

from bzzz.network.jetstream import JetStreamBus
from bzzz.network.peer_board import PEER_WATCH_GONE, peer_bucket

pytestmark = pytest.mark.integration


async def test_rebuilt_watches_of_the_board_end_and_are_dropped_soon(nats_url: str) -> None:
    bus = JetStreamBus([nats_url], "main")
    await bus.start()
    try:
        await bus.put_peer("node-a", b"beat")
        heard = asyncio.Event()

        async def on_change(key: str, data: bytes | None) -> None:
            heard.set()

        for _ in range(10):
            heard.clear()
            watching = asyncio.create_task(bus.watch_peers(on_change, [">", "p.x.*"]))
            async with asyncio.timeout(10):
                await heard.wait()
            watching.cancel()
            # A cancellation a nats-py call swallowed (wait_for, Python 3.11) left the watch
            # looping and a stopping node waiting forever: it must end, cancelled.
            done, _ = await asyncio.wait({watching}, timeout=10)
            assert watching in done and watching.cancelled()
        nc = await nats.connect(nats_url)
        try:
            infos = await nc.jetstream().consumers_info(f"KV_{peer_bucket('main')}")
        finally:
            await nc.close()
    finally:
        await bus.close()
    assert infos, "the watches made consumers on the board"
    assert all(
        info.config.inactive_threshold is not None
        and info.config.inactive_threshold <= PEER_WATCH_GONE
        for info in infos
    ), [info.config.inactive_threshold for info in infos]
