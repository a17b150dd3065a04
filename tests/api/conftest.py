"""An HTTP client of a running in-process node's app (no credential: a loopback node)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from receiver import http_receiver  # noqa: F401 - the fixture

from bzzz.api.app import build_app
from bzzz.mcp.server import build_server
from bzzz.node.core import Node


@pytest.fixture
async def http(node: Node) -> AsyncIterator[httpx.AsyncClient]:
    """The node's app through httpx.ASGITransport."""
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as client:
        yield client


@pytest.fixture
def app_routes(node: Node) -> list[object]:
    """The routes of the node's app."""
    server, _ = build_server(node)
    return list(build_app(node, server, "127.0.0.1").routes)
