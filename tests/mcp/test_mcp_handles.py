"""Every tool that acts for or reads as an agent takes ``agent_handle`` the same way, and errors
name the caller as it is: a session under the legacy handshake, a caller without one (the
stateless 2026-07-28 client). Both clients over streamable HTTP, the official SDK's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bzzz.api.app import build_app
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

BASE = "http://127.0.0.1:7331"
MODES = ["stateless", "legacy"]


@contextlib.asynccontextmanager
async def clients(node: Node, mode: str, count: int) -> AsyncIterator[list[Client]]:
    """``count`` clients of the node's /mcp, in ``mode``, without a credential."""
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(server.session_manager.run())
        await stack.enter_async_context(http)
        opened = [
            await stack.enter_async_context(
                Client(
                    streamable_http_client(f"{BASE}/mcp", http_client=http),
                    mode="legacy" if mode == "legacy" else "auto",
                )
            )
            for _ in range(count)
        ]
        yield opened


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured answer, success or ErrorResponse."""
    async with asyncio.timeout(10):
        result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None, result
    return dict(result.structured_content)


@pytest.mark.parametrize("mode", MODES)
async def test_every_agent_tool_takes_agent_handle_and_lookup_checks_it(
    node: Node, mode: str
) -> None:
    async with clients(node, mode, 1) as [client]:
        tools = (await client.list_tools()).tools
        made = await call(client, "bzzz_announce", agent_id="ana", role="dev")
        handle = made["agent_handle"]
        found = await call(client, "bzzz_lookup", semantic_address="bzzz://*", agent_handle=handle)
        wrong = handle.rsplit(":", 1)[0] + ":not-the-secret"
        refused = await call(client, "bzzz_lookup", semantic_address="bzzz://*", agent_handle=wrong)
        posted = await call(
            client,
            "bzzz_post",
            target_address="bzzz://ana",
            message_type="text",
            content={"text": "note to self"},
            agent_handle=wrong,
        )

    takes = {t.name: "agent_handle" in t.input_schema.get("properties", {}) for t in tools}
    assert takes == dict.fromkeys(takes, True) and len(takes) == 7, takes
    assert found["success"] is True and [m["id"] for m in found["matches"]] == ["ana"]
    # A wrong handle is judged as bzzz_post judges it: refused where only the handle could
    # name the agent, beside the point where the caller's session holds it.
    assert refused.get("code") == posted.get("code")
    if mode == "stateless":
        assert (refused["success"], refused["code"]) == (False, "PERMISSION_DENIED")
    else:
        assert refused["success"] is True and posted["success"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_errors_speak_of_a_session_only_to_a_caller_with_one(node: Node, mode: str) -> None:
    async with clients(node, mode, 2) as [first, second]:
        await call(first, "bzzz_announce", agent_id="ana", role="dev")
        taken = await call(second, "bzzz_announce", agent_id="ana", role="spy")
        acting = await call(
            second,
            "bzzz_post",
            target_address="bzzz://ana",
            message_type="text",
            content={"text": "hi"},
            agent_id="ana",
        )

    assert (taken["success"], taken["code"]) == (False, "INVALID_PARAMETERS")
    assert (acting["success"], acting["code"]) == (False, "INVALID_PARAMETERS")
    if mode == "legacy":
        assert "held by a live agent of another session" in taken["error"]
        assert "this session has not announced an agent" in acting["error"]
    else:
        assert "held by a live agent of another caller" in taken["error"]
        assert "this call acts as no agent" in acting["error"]
        assert "session" not in taken["error"]
