"""A real local HTTP receiver for webhooks, and nodes whose webhook queue the test drives."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from receiver import ReceiverFactory, http_receiver  # noqa: F401 - the fixture

from bzzz.config import Settings
from bzzz.events.webhooks import WebhookDispatcher
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node


async def _idle(self: WebhookDispatcher) -> None:
    # Stand-in for the dispatch loop: it delivers nothing (the tests drive the queue) and,
    # like the real one, leaves at stop() instead of holding the node's stop for its timeout.
    while not self._stopping:
        self._wake.clear()
        await self._wake.wait()


@pytest.fixture
def driven_node(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., AbstractAsyncContextManager[Node]]]:
    """Start a node whose background webhook loop idles: the test calls deliver_due itself.

    Keyword arguments set the node's webhook settings (backoffs, max_age); ``http_host`` its
    bind address (a non-loopback one makes a shared node, where private targets are refused).
    """
    monkeypatch.setattr(WebhookDispatcher, "run", _idle)

    @asynccontextmanager
    async def start(http_host: str = "127.0.0.1", **webhooks: Any) -> AsyncIterator[Node]:
        settings.node.http_host = http_host
        for name, value in webhooks.items():
            setattr(settings.webhooks, name, value)
        async with Node(settings, bus=memory_bus) as node:
            yield node

    yield start
