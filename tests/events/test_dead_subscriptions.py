"""A webhook whose URL has failed for ``webhooks.max_age`` stops: its subscription is dead.

The node's own dispatcher retries a closed port; once no delivery has got through for
max_age the subscription is marked dead (an envelope every node applies), its pending
deliveries become dead letters, new events queue nothing for it, and `bzzz subscriptions
list` shows it. The test waits on the envelope, never on a sleep.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence

import pytest

from bzzz.cli import main
from bzzz.config import Settings
from bzzz.network.envelope import Envelope
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .conftest import ReceiverFactory
from .test_webhooks import announce, subscribe_webhook

MAX_AGE = 0.3


class Seen:
    """Sets an event when an envelope of one type has been applied."""

    def __init__(self, node: Node, kind: str) -> None:
        self.kind = kind
        self.envelopes: list[Envelope] = []
        self.event = asyncio.Event()
        node.projector.add_applied_listener(self._applied)

    def _applied(self, envelopes: Sequence[Envelope]) -> None:
        for env in envelopes:
            if env.type == self.kind:
                self.envelopes.append(env)
                self.event.set()


@pytest.fixture
async def live_node(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A node whose own dispatcher retries fast and gives a URL MAX_AGE seconds."""
    settings.webhooks.initial_backoff = 0.01
    settings.webhooks.max_backoff = 0.05
    settings.webhooks.max_age = MAX_AGE
    async with Node(settings, bus=memory_bus) as running:
        yield running


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_webhook_failing_for_max_age_is_marked_dead_and_stops(
    live_node: Node, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    node = live_node
    dead = Seen(node, "subscription.dead")
    sub = await subscribe_webhook(node, f"http://127.0.0.1:{closed_port()}/hook")
    await announce(node, "arch-1")

    async with asyncio.timeout(10):
        await dead.event.wait()
    attempts = node.webhooks.failed_attempts + node.webhooks.dead
    await announce(node, "arch-2")  # after the mark: queues nothing for it
    [shown] = [
        s for s in await node.subscriptions.subscriptions() if s.id == sub["subscription_id"]
    ]
    deliveries = await node.subscriptions.deliveries()

    assert shown.status == "dead"
    assert [e.payload["subscription_id"] for e in dead.envelopes] == [sub["subscription_id"]]
    assert "ConnectError" in dead.envelopes[0].payload["reason"]
    assert attempts >= 2  # it was retried before it was given up
    assert len(deliveries) == 1 and deliveries[0].status == "dead"
    assert await node.subscriptions.deliveries("pending") == []
    assert node.status()["webhooks"]["dead_subscriptions"] == 1

    code = await asyncio.to_thread(
        main, ["--data-dir", str(settings.node.data_dir), "subscriptions", "list"]
    )
    listed = capsys.readouterr().out
    assert code == 0
    [row] = [line for line in listed.splitlines() if sub["subscription_id"] in line]
    assert "dead" in row


async def test_a_webhook_that_gets_through_again_in_time_stays_active(
    live_node: Node, settings: Settings, http_receiver: ReceiverFactory
) -> None:
    node = live_node
    # Failing, then answering: a success within max_age resets the clock. Here max_age is long
    # enough for any machine to make the three attempts inside it (with MAX_AGE, a loaded one
    # once spaced two failures past it and the subscription died before the third).
    settings.webhooks.max_age = 60.0
    async with http_receiver(lambda n: 500 if n < 2 else 200) as receiver:
        sub = await subscribe_webhook(node, receiver.url)
        await announce(node, "arch-1")
        await receiver.wait_for(3, within=30.0)
        # The third answer reaches the receiver before the node has recorded it.
        async with asyncio.timeout(10.0):
            while True:
                if [d.status for d in await node.subscriptions.deliveries()] != ["pending"]:
                    break
                await asyncio.sleep(0.05)
    [shown] = [
        s for s in await node.subscriptions.subscriptions() if s.id == sub["subscription_id"]
    ]

    assert shown.status == "active"
    assert [d.status for d in await node.subscriptions.deliveries()] == ["delivered"]
