"""Over real streamable HTTP, a subscribed session hears resources/updated on its GET stream."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceUpdatedNotification

from .support import HttpNode, call, node_env

pytestmark = [
    pytest.mark.integration,
    # Real hosts speak the 2025-11-25 protocol, where resources/subscribe is how it is done.
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]


async def test_a_subscription_resource_notifies_its_http_session(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = HttpNode(data_dir, node_env(clean_env, data_dir), tmp_path / "logs")
    await node.start()
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            await updated.put(str(message.params.uri))

    try:
        async with (
            streamable_http_client(node.mcp_url) as (read, write),
            ClientSession(read, write, message_handler=on_message) as watcher,
        ):
            await watcher.initialize()
            sub = await call(watcher, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
            await watcher.subscribe_resource(sub["resource_uri"])

            async with (
                streamable_http_client(node.mcp_url) as (read2, write2),
                ClientSession(read2, write2) as other,
            ):
                await other.initialize()
                await call(other, "bzzz_announce", {"agent_id": "late-1", "role": "reviewer"})

                async with asyncio.timeout(10):
                    uri = await updated.get()
            assert uri == sub["resource_uri"]
            events = await watcher.read_resource(uri)
            assert "late-1" in events.contents[0].text  # type: ignore[union-attr]
    finally:
        await node.kill()
