"""Webhook dead letters over the HTTP API: listed with their error for admins, redriven."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from receiver import ReceiverFactory

from bzzz.api.app import build_app
from bzzz.config import Settings
from bzzz.domain import Delivery
from bzzz.eventlog import Caller
from bzzz.events.webhooks import WebhookDispatcher
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import SubscribeInput

from .test_rest import announce, refused


async def _idle(self: WebhookDispatcher) -> None:
    # Stand-in for the dispatch loop: it delivers nothing (the tests drive the queue) and,
    # like the real one, leaves at stop() instead of holding the node's stop for its timeout.
    while not self._stopping:
        self._wake.clear()
        await self._wake.wait()


@pytest.fixture
async def driven(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Node, httpx.AsyncClient]]:
    """A node whose webhook queue the test drives (fast retries, dead after 50 ms)."""
    monkeypatch.setattr(WebhookDispatcher, "run", _idle)
    for name, value in {"initial_backoff": 0.001, "max_backoff": 0.002, "timeout": 2.0,
                        "max_age": 0.05}.items():  # fmt: skip
        setattr(settings.webhooks, name, value)
    async with Node(settings, bus=memory_bus) as node:
        server, _ = build_server(node)
        transport = httpx.ASGITransport(app=build_app(node, server, "127.0.0.1"))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as http:
            yield node, http


async def drive_until(node: Node, status: str) -> list[Delivery]:
    """Run the node's delivery queue until a delivery has ``status`` (bounded)."""
    async with asyncio.timeout(5), httpx.AsyncClient(timeout=2.0) as client:
        while not (found := await node.subscriptions.deliveries(status)):
            await node.webhooks.deliver_due(client)
    return found


async def test_a_dead_letter_is_listed_with_its_error_and_redriven(
    driven: tuple[Node, httpx.AsyncClient], http_receiver: ReceiverFactory
) -> None:
    node, http = driven
    async with http_receiver(lambda _n: 500) as receiver:
        await node.subscriptions.subscribe(
            Caller("watcher"),
            SubscribeInput(event_types=["agent_announcement"], callback_webhook=receiver.url),
        )
        await announce(http, "arch")
        [dead] = await drive_until(node, "dead")

    listed = (await http.get("/api/v1/webhooks")).json()["deliveries"]
    assert [(d["id"], d["status"], d["last_error"]) for d in listed] == [
        (dead.id, "dead", "HTTP 500")
    ]
    redriven = await http.post("/api/v1/webhooks/redrive", json={"delivery_ids": [dead.id]})

    assert redriven.json()["redriven"] == [dead.id]
    assert (await http.get("/api/v1/webhooks")).json()["deliveries"] == []
    pending = (await http.get("/api/v1/webhooks", params={"status": "pending"})).json()
    assert [d["id"] for d in pending["deliveries"]] == [dead.id]
    again = await http.post("/api/v1/webhooks/redrive", json={"delivery_ids": [dead.id]})
    refused(again, 400, "INVALID_PARAMETERS")
    refused(await http.get("/api/v1/webhooks", params={"status": "lost"}), 400,
            "INVALID_PARAMETERS")  # fmt: skip
