"""A local A2A agent made with the a2a-sdk server: it answers each message with "echo: <text>".

Its card may be signed (ES256, its JWK set served at /jwks.json and named by ``jku``), and a
test may spoil the signature by changing the card after it was signed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
)
from a2a.utils.signing import create_agent_card_signer
from cryptography.hazmat.primitives.asymmetric import ec
from e2e.support import wait_until
from jwt.algorithms import ECAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@dataclass
class Echo(AgentExecutor):
    """Answers at once with one message; remembers what it was asked."""

    asked: list[str] = field(default_factory=list)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Echo the user's text."""
        text = context.get_user_input()
        self.asked.append(text)
        await event_queue.enqueue_event(
            Message(
                role=Role.ROLE_AGENT,
                message_id=f"answer-{len(self.asked)}",
                context_id=context.context_id or "",
                parts=[Part(text=f"echo: {text.splitlines()[0] if text else ''}")],
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs long enough to cancel."""


@dataclass
class Remote:
    """A served echo agent."""

    url: str
    echo: Echo


def _card(url: str) -> AgentCard:
    return AgentCard(
        name="Echo Agent",
        description="repeats what it is told",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{url}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["echo"])],
    )


@contextlib.asynccontextmanager
async def remote_agent(
    *, signed: bool = False, tampered: bool = False, port: int = 0
) -> AsyncIterator[Remote]:
    """An echo agent on a loopback port (a free one unless ``port`` is given)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    card = _card(url)
    routes: list[Any] = []
    if signed:
        key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(ECAlgorithm.to_jwk(key.public_key())) | {"kid": "k1", "alg": "ES256"}
        header = {"kid": "k1", "alg": "ES256", "jku": f"{url}/jwks.json", "typ": "JOSE"}
        card = create_agent_card_signer(key, header)(card)  # type: ignore[arg-type]

        async def jwks(request: Request) -> JSONResponse:
            return JSONResponse({"keys": [jwk]})

        routes.append(Route("/jwks.json", jwks))
        if tampered:
            card.description = "repeats what it is told, and more"  # after the signature
    echo = Echo()
    handler = DefaultRequestHandler(echo, InMemoryTaskStore(), card)
    routes += create_agent_card_routes(card)
    routes += create_jsonrpc_routes(handler, "/")
    app = Starlette(routes=routes)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        async with asyncio.timeout(10):
            await wait_until(lambda: server.started)
        yield Remote(url, echo)
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        listener.close()
