"""Webhooks: signed POSTs to a real local receiver, retried with backoff, then dead-lettered."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

from bzzz.config import Settings
from bzzz.domain import Delivery
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller
from bzzz.events.webhooks import SIGNATURE_HEADER, sign_body, verify_signature
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, SubscribeInput

from .conftest import ReceiverFactory

DrivenNode = Callable[..., AbstractAsyncContextManager[Node]]
# The delivery timeout is a bound for a receiver in this process, not a speed target: at 2 s a
# loaded machine (the whole suite on 2 cores) once let the first attempt time out connecting.
FAST = {"initial_backoff": 0.001, "max_backoff": 0.002, "timeout": 15.0}


async def subscribe_webhook(node: Node, url: str) -> dict[str, Any]:
    return await node.subscriptions.subscribe(
        Caller("watcher"),
        SubscribeInput(event_types=["agent_announcement"], callback_webhook=url),
    )


async def announce(node: Node, agent_id: str) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role="architect")
    )


async def drive_until(node: Node, status: str, within: float = 30.0) -> list[Delivery]:
    """Run the node's delivery queue until a delivery has ``status``."""
    async with asyncio.timeout(within), httpx.AsyncClient(timeout=2.0) as client:
        while not (found := await node.subscriptions.deliveries(status)):
            await node.webhooks.deliver_due(client)
    return found


def always(status: int) -> Callable[[int], int]:
    return lambda _n: status


def fail_first(_n: int) -> int:
    return 500 if _n == 0 else 200


async def test_a_failed_delivery_is_retried_and_then_delivered(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    async with driven_node(**FAST) as node, http_receiver(fail_first) as receiver:
        sub = await subscribe_webhook(node, receiver.url)
        await announce(node, "arch-1")

        [delivery] = await drive_until(node, "delivered")

        assert await node.subscriptions.deliveries("pending") == []
    first, second = receiver.requests
    assert (first.status, second.status) == (500, 200)
    for request in (first, second):
        assert request.path == "/hooks/bzzz"
        assert request.headers["content-type"] == "application/json"
        signature = request.headers["x-bzzz-signature"]
        assert verify_signature(sub["webhook_secret"], signature, request.body)
    assert first.body == second.body
    event = second.json()
    assert event["event_type"] == "agent_announcement"
    assert event["data"]["agent"]["id"] == "arch-1"
    assert event["subscription_id"] == sub["subscription_id"]
    assert second.headers["x-bzzz-event-id"] == event["event_id"] == delivery.event_id
    assert (delivery.attempts, delivery.last_error) == (2, None)
    assert delivery.finished_at is not None


async def test_a_delivery_that_keeps_failing_is_dead_lettered(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    async with driven_node(**FAST, max_age=0.05) as node, http_receiver(always(500)) as receiver:
        await subscribe_webhook(node, receiver.url)
        await announce(node, "arch-1")

        [dead] = await drive_until(node, "dead")

        assert await node.subscriptions.deliveries("pending") == []
        assert await node.subscriptions.deliveries("delivered") == []
    assert dead.last_error == "HTTP 500"
    assert dead.attempts == len(receiver.requests) >= 1
    assert dead.finished_at is not None
    assert node.webhooks.dead == 1


async def test_an_unreachable_receiver_is_dead_lettered_with_the_reason(
    driven_node: DrivenNode,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    async with driven_node(**FAST, max_age=0.05) as node:
        await subscribe_webhook(node, f"http://127.0.0.1:{closed_port}/hook")
        await announce(node, "arch-1")

        [dead] = await drive_until(node, "dead")

    assert dead.last_error is not None
    assert "ConnectError" in dead.last_error


async def test_a_private_address_is_refused_at_subscribe_on_a_shared_node(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    shared = driven_node(**FAST, http_host="0.0.0.0")
    async with shared as node, http_receiver(always(200)) as rx:
        with pytest.raises(InvalidParameters, match="allow_private"):
            await subscribe_webhook(node, rx.url)

        assert await node.subscriptions.deliveries() == []


async def test_a_name_resolving_to_a_private_address_is_dead_lettered_on_a_shared_node(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    # The machine's own host name is not an address literal, so subscribe accepts it; it
    # resolves to a private address, which the dispatcher refuses at delivery time.
    host = socket.gethostname()
    resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    if any(ipaddress.ip_address(a.split("%")[0]).is_global for a in resolved):
        pytest.skip(f"{host} resolves to a public address here")
    shared = driven_node(**FAST, http_host="0.0.0.0")
    async with shared as node, http_receiver(always(200)) as rx:
        port = rx.url.rsplit(":", 1)[1]
        await subscribe_webhook(node, f"http://{host}:{port}")
        await announce(node, "arch-1")

        [dead] = await drive_until(node, "dead")

    assert rx.requests == []
    assert dead.attempts == 1
    assert dead.last_error is not None
    assert "allow_private" in dead.last_error


async def test_a_delivery_is_not_retried_before_its_backoff(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    slow = {"initial_backoff": 60.0, "max_backoff": 60.0}
    async with driven_node(**slow) as node, http_receiver(fail_first) as receiver:
        await subscribe_webhook(node, receiver.url)
        await announce(node, "arch-1")
        async with httpx.AsyncClient() as client:
            attempted = [await node.webhooks.deliver_due(client) for _ in range(3)]

        [pending] = await node.subscriptions.deliveries("pending")

    assert attempted == [1, 0, 0]
    assert len(receiver.requests) == 1
    assert (pending.attempts, pending.last_error) == (1, "HTTP 500")


@pytest.fixture
async def live_node(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A node whose own background dispatcher delivers, with short backoffs."""
    settings.webhooks.initial_backoff = 0.01
    settings.webhooks.max_backoff = 0.02
    async with Node(settings, bus=memory_bus) as running:
        yield running


async def test_the_nodes_own_dispatcher_delivers_and_retries_on_its_own(
    live_node: Node, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(fail_first) as receiver:
        sub = await subscribe_webhook(live_node, receiver.url)
        await announce(live_node, "arch-1")

        first, second = await receiver.wait_for(2)

    assert (first.status, second.status) == (500, 200)
    assert verify_signature(sub["webhook_secret"], second.headers["x-bzzz-signature"], second.body)
    assert second.json()["data"]["agent"]["id"] == "arch-1"


def test_a_signature_checks_out_only_for_the_same_secret_body_and_recent_time() -> None:
    body = b'{"event_type":"agent_announcement"}'
    now = int(time.time())
    header = sign_body("secret", now, body)

    assert header.startswith(f"t={now},v1=")
    assert verify_signature("secret", header, body)
    assert not verify_signature("other-secret", header, body)
    assert not verify_signature("secret", header, body + b" ")
    assert not verify_signature("secret", sign_body("secret", now - 3600, body), body)
    assert not verify_signature("secret", "garbage", body)
    assert not verify_signature("secret", "t=abc,v1=00", body)


def test_the_signature_header_name_is_documented() -> None:
    assert SIGNATURE_HEADER == "X-Bzzz-Signature"
