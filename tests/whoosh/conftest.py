"""A WHOOSH stand-in on a loopback port that records every request, and nodes that use it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bzzz.config import OpenAISettings, Settings, WhooshSettings
from bzzz.llm.testing import ScriptedModelServer

TOKEN = "whoosh-token-for-tests-only"
PUBLIC_URL = "http://127.0.0.1:7331"
HOSTED = [
    {"role": "architect", "agent_id": "arch-1", "project": "shop", "max_tasks": 2},
    {"role": "reviewer", "agent_id": "rev-1", "model": "gpt-4o"},
]


@dataclass(frozen=True, slots=True)
class Seen:
    """One request WHOOSH received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Quiet(uvicorn.Server):
    def capture_signals(self) -> contextlib.nullcontext[None]:  # type: ignore[override]
        return contextlib.nullcontext()


class FakeWhoosh:
    """Answers /agents routes with ``answers[(method, kind)]`` (default 2xx) and records them.

    The port is taken at once but listened on only at ``start``: until then connections are
    refused, as by a WHOOSH that is down.
    """

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.seen: list[Seen] = []
        self.answers: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        self._arrived = asyncio.Condition()
        self._server: _Quiet | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listen: WHOOSH is up."""
        self.sock.listen(64)
        self.sock.setblocking(False)
        routes = [
            Route("/agents", self._handle, methods=["POST"]),
            Route("/agents/{agent_id}/health", self._handle, methods=["PUT"]),
            Route("/agents/{agent_id}", self._handle, methods=["DELETE"]),
        ]
        config = uvicorn.Config(
            Starlette(routes=routes), log_level="warning", lifespan="off",
            timeout_graceful_shutdown=1,
        )  # fmt: skip
        self._server = _Quiet(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self.sock]))

    async def close(self) -> None:
        """Stop serving."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self.sock.close()

    def of(self, method: str, path: str | None = None) -> list[Seen]:
        """The requests of one method (and path) so far."""
        return [s for s in self.seen if s.method == method and path in (None, s.path)]

    async def wait_for(self, method: str, count: int, path: str | None = None) -> list[Seen]:
        """Wait until ``count`` such requests arrived (callers bound it)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.of(method, path)) >= count)
        return self.of(method, path)

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        seen = Seen(
            request.method,
            request.url.path,
            {k.lower(): v for k, v in request.headers.items()},
            await request.json() if raw else None,
        )
        async with self._arrived:
            self.seen.append(seen)
            self._arrived.notify_all()
        kind = request.url.path.rsplit("/", 1)[-1] if request.method == "PUT" else "agents"
        status, body = self.answers.get((request.method, kind), (200, {"success": True}))
        return JSONResponse(body, status_code=status)


@pytest.fixture
async def whoosh() -> AsyncIterator[FakeWhoosh]:
    """A WHOOSH stand-in, not yet listening (``await whoosh.start()``)."""
    server = FakeWhoosh()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    """A scripted model endpoint: hosted agents run only with one."""
    server = ScriptedModelServer()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
def whoosh_settings(
    settings: Settings, model_server: ScriptedModelServer, whoosh: FakeWhoosh
) -> Settings:
    """A node hosting two agents, registering them with ``whoosh`` every 50 ms."""
    settings.openai = OpenAISettings.model_validate(
        settings.openai.model_dump() | {"api_key": "test-key", "base_url": model_server.base_url}
    )
    settings.agents.default_roles = [dict(role) for role in HOSTED]
    settings.auth.public_url = PUBLIC_URL
    settings.whoosh = WhooshSettings.model_validate(
        {
            "url": whoosh.url,
            "token": TOKEN,
            "health_interval": 0.05,
            "initial_backoff": 0.05,
            "max_backoff": 0.2,
            "timeout": 2.0,
        }
    )
    return settings
