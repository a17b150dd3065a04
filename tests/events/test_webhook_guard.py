"""Webhooks cannot probe the inside: refused at bzzz_subscribe, re-checked on the resolved
address at delivery (and connected to that address), errors generic for non-admins."""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from mcp import Client

from bzzz.events.service import GENERIC_DELIVERY_ERROR, delivery_view
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

from .conftest import ReceiverFactory
from .test_targets import FORBIDDEN_SPELLINGS, LOOPBACK_SPELLINGS
from .test_webhooks import FAST, always, announce, drive_until, subscribe_webhook

DrivenNode = Callable[..., AbstractAsyncContextManager[Node]]
SHARED = "0.0.0.0"  # a bind on every interface: the node is reachable from elsewhere


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


async def _subscribe_tool(client: Client, url: str) -> Any:
    return await client.call_tool(
        "bzzz_subscribe", {"event_types": ["agent_announcement"], "callback_webhook": url}
    )


async def _subscription_rows(node: Node) -> int:
    return len(await node.subscriptions.subscriptions())


async def test_bzzz_subscribe_refuses_every_inside_spelling_on_a_shared_node(
    driven_node: DrivenNode,
) -> None:
    spellings = {**LOOPBACK_SPELLINGS, **FORBIDDEN_SPELLINGS}
    async with driven_node(http_host=SHARED) as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as client:
            results = {name: await _subscribe_tool(client, url) for name, url in spellings.items()}

        stored = await _subscription_rows(node)

    accepted = [name for name, result in results.items() if not result.is_error]
    assert accepted == []
    for result in results.values():
        assert result.structured_content is not None
        assert result.structured_content["code"] == "INVALID_PARAMETERS"
        assert "callback_webhook" in result.structured_content["error"]
    assert stored == 0


async def test_bzzz_subscribe_allows_loopback_on_a_loopback_node_but_never_metadata(
    driven_node: DrivenNode,
) -> None:
    async with driven_node() as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as client:
            loopback = {n: await _subscribe_tool(client, u) for n, u in LOOPBACK_SPELLINGS.items()}
            forbidden = {
                n: await _subscribe_tool(client, u) for n, u in FORBIDDEN_SPELLINGS.items()
            }

        stored = await _subscription_rows(node)

    assert [n for n, r in loopback.items() if r.is_error] == []
    assert [n for n, r in forbidden.items() if not r.is_error] == []
    assert stored == len(LOOPBACK_SPELLINGS)


async def test_allow_private_lets_a_shared_node_call_private_receivers(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    async with (
        driven_node(**FAST, http_host=SHARED, allow_private=True) as node,
        http_receiver(always(200)) as receiver,
    ):
        await subscribe_webhook(node, receiver.url)
        await announce(node, "arch-1")

        await drive_until(node, "delivered")

    assert len(receiver.requests) == 1


async def test_a_name_rebound_to_a_private_address_is_refused_at_delivery(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    asked: list[tuple[str, int]] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return ["127.0.0.1"]  # public when subscribed, loopback when delivered

    async with driven_node(**FAST, http_host=SHARED) as node, http_receiver(always(200)) as rx:
        node.webhooks.resolver = rebinding
        url = f"http://hooks.example.com:{_port(rx.url)}/hooks/bzzz"
        await subscribe_webhook(node, url)
        await announce(node, "arch-1")

        [dead] = await drive_until(node, "dead")

    assert rx.requests == []
    assert asked == [("hooks.example.com", _port(rx.url))]
    assert dead.attempts == 1
    assert dead.last_error is not None and "127.0.0.1" in dead.last_error


async def test_a_delivery_connects_to_the_address_it_checked(
    driven_node: DrivenNode, http_receiver: ReceiverFactory
) -> None:
    # The name resolves nowhere but in the stub: the POST reaches the receiver only if the
    # dispatcher connects to the checked address itself, naming the host in the Host header.
    async def stub(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    async with driven_node(**FAST) as node, http_receiver(always(200)) as rx:
        node.webhooks.resolver = stub
        url = f"http://hooks.bzzz-test.invalid:{_port(rx.url)}/hooks/bzzz?k=v"
        await subscribe_webhook(node, url)
        await announce(node, "arch-1")

        [delivered] = await drive_until(node, "delivered")

    [request] = rx.requests
    assert request.path == "/hooks/bzzz?k=v"
    assert request.headers["host"] == f"hooks.bzzz-test.invalid:{_port(rx.url)}"
    assert delivered.url == url


async def test_a_name_resolving_to_metadata_is_refused_even_on_a_loopback_node(
    driven_node: DrivenNode,
) -> None:
    async def metadata(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    async with driven_node(**FAST) as node:
        node.webhooks.resolver = metadata
        await subscribe_webhook(node, "http://hooks.example.com/x")
        await announce(node, "arch-1")

        [dead] = await drive_until(node, "dead")

    assert dead.last_error is not None and "never allowed" in dead.last_error


@pytest.mark.parametrize("answer", ["closed-port", "http-500"])
async def test_non_admins_read_a_generic_delivery_error_admins_the_detail(
    driven_node: DrivenNode, http_receiver: ReceiverFactory, answer: str
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    async with driven_node(**FAST, max_age=0.05) as node, http_receiver(always(500)) as rx:
        await subscribe_webhook(node, closed if answer == "closed-port" else rx.url)
        await announce(node, "arch-1")
        [dead] = await drive_until(node, "dead")

        [admin] = await node.subscriptions.delivery_views("dead", detailed=True)
        [other] = await node.subscriptions.delivery_views("dead")

    assert admin["last_error"] == dead.last_error
    if answer == "http-500":
        assert admin["last_error"] == "HTTP 500"
    else:
        # A refused connect is ConnectError; on a loaded machine the short test timeout can end
        # the connect first (ConnectTimeout). Either way the admin reads the transport's detail.
        assert admin["last_error"].startswith(("ConnectError", "ConnectTimeout"))
    assert other["last_error"] == GENERIC_DELIVERY_ERROR
    assert {k: v for k, v in other.items() if k != "last_error"} == {
        k: v for k, v in admin.items() if k != "last_error"
    }
    assert delivery_view(dead, detailed=False)["last_error"] == GENERIC_DELIVERY_ERROR
