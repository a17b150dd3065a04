"""A node served by uvicorn on a loopback port (in this process), for the A2A tests."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import uvicorn
from e2e.support import wait_until

from bzzz.api.app import build_app
from bzzz.config import Settings
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope


@dataclass
class Served:
    """A running node and its URL."""

    node: Node
    url: str

    async def token(self, name: str, projects: list[str], scope: Scope = Scope.WRITE) -> str:
        """A network token (as `bzzz token create` makes one); its secret."""
        _, secret = await self.node.access.create_token(LOCAL, name, projects, ["*"], scope, None)
        return secret


@contextlib.asynccontextmanager
async def serve(settings: Settings, bus: InMemoryBus) -> AsyncIterator[Served]:
    """A node with these settings served by uvicorn on a free loopback port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    async with Node(settings, bus=bus, address=f"{url}/mcp") as node:
        server, _ = build_server(node)
        app = build_app(node, server, "127.0.0.1", url)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
        web = uvicorn.Server(config)
        task = asyncio.create_task(web.serve(sockets=[listener]))
        try:
            async with asyncio.timeout(10):
                await wait_until(lambda: web.started)
            yield Served(node, url)
        finally:
            web.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await task
            listener.close()


@pytest.fixture
async def served(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Served]:
    """A node that requires credentials, served on a free loopback port."""
    settings.auth.required = True
    async with serve(settings, memory_bus) as running:
        yield running
