"""MCP session quotas: no single principal holds every session, and idle empty ones go first.

The SDK's session manager opens a session for each legacy ``initialize`` and keeps it until the
client ends it or it idles out (30 minutes). One client opening thousands would lock every
other client out. This middleware counts sessions per principal and in total, and before a new
one opens, ends the sessions that never announced an agent and idled past
``limits.idle_session_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bzzz.errors import BzzzError, ErrorCode, RateLimited
from bzzz.mcp.sessions import PRINCIPAL_STATE
from bzzz.principal import ANONYMOUS, Principal

logger = logging.getLogger(__name__)

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


@dataclass(slots=True)
class _Tracked:
    principal: str
    last_used: float


class SessionQuota:
    """Counts legacy MCP sessions per principal and in total; reaps idle ones without agents."""

    def __init__(
        self,
        app: ASGIApp,
        manager: StreamableHTTPSessionManager,
        *,
        per_principal: int,
        total: int,
        idle_seconds: float,
        holds_agents: Callable[[str], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self._manager = manager
        self._per_principal = per_principal
        self._total = total
        self._idle = idle_seconds
        self._holds_agents = holds_agents
        self._clock = clock
        self._sessions: dict[str, _Tracked] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Admit, count and pass on MCP requests; refuse a session past a quota."""
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        session_id = headers.get(_SESSION_HEADER)
        if session_id is not None:
            tracked = self._sessions.get(session_id.decode("latin-1"))
            if tracked is not None:
                tracked.last_used = self._clock()
            await self.app(scope, receive, send)
            return
        version = headers.get(_VERSION_HEADER)
        opening = scope["method"] == "POST" and (
            version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
        )
        if not opening:
            await self.app(scope, receive, send)
            return
        who = scope.get("state", {}).get(PRINCIPAL_STATE, ANONYMOUS)
        refusal = await self._admit(who)
        if refusal is not None:
            status = 503 if refusal.details.get("limit") == "sessions_total" else 429
            response = JSONResponse(refusal.to_response(), status_code=status)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, self._learning(send, who))

    def _learning(self, send: Send, who: Principal) -> Send:
        async def learn(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name == _SESSION_HEADER:
                        self._sessions[value.decode("latin-1")] = _Tracked(who.id, self._clock())
            await send(message)

        return learn

    async def _admit(self, who: Principal) -> BzzzError | None:
        await self._reap()
        mine = sum(1 for t in self._sessions.values() if t.principal == who.id)
        if self._per_principal and mine >= self._per_principal:
            return RateLimited(
                f"this credential already holds {mine} MCP sessions (at most "
                f"{self._per_principal}); end one, or use the sessionless protocol",
                details={"limit": "sessions_per_principal", "retry_after": self._idle},
            )
        if self._total and len(self._sessions) >= self._total:
            return BzzzError(
                f"the node holds its maximum of {self._total} MCP sessions; try again later",
                code=ErrorCode.RATE_LIMITED,
                details={"limit": "sessions_total", "retry_after": self._idle},
            )
        return None

    async def _reap(self) -> None:
        """Forget ended sessions; end those idle past the bound that hold no agent."""
        # The SDK keeps its open sessions in a private map; as in mcp/sessions.py, its own
        # tests reach it the same way, and there is no public accessor in 2.3.
        live: dict[str, Any] = self._manager._server_instances
        cutoff = self._clock() - self._idle
        for session_id, tracked in list(self._sessions.items()):
            transport = live.get(session_id)
            if transport is None:
                del self._sessions[session_id]
            elif tracked.last_used < cutoff and not self._holds_agents(session_id):
                logger.info("ending MCP session %s: idle and without agents", session_id[:12])
                del self._sessions[session_id]
                live.pop(session_id, None)
                await transport.terminate()
