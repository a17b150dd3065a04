"""MCP sessions over HTTP: each belongs to its principal, and no principal holds every one.

The SDK's session manager opens a session for each legacy ``initialize`` and keeps it until the
client ends it or it idles out. This middleware

* binds each session to the principal that opened it: a request of another principal naming
  the session id (POST, GET, DELETE) is answered exactly as for an unknown session (404) and
  reaches nothing;
* bounds the sessions of a principal and of the node. A principal at its bound has its least
  recently used session that holds no agent ended to make room; only sessions that hold
  agents count toward a refusal, so one client opening sessions in a loop cannot lock out
  the others (on a node without credentials every caller is one principal);
* ends sessions that never announced an agent and idled past ``limits.idle_session_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bzzz.errors import BzzzError, ErrorCode, RateLimited
from bzzz.mcp.sessions import PRINCIPAL_STATE
from bzzz.principal import ANONYMOUS, Principal

logger = logging.getLogger(__name__)

_SESSION_HEADER = b"mcp-session-id"
_VERSION_HEADER = b"mcp-protocol-version"


def unknown_session() -> Response:
    """The SDK's own answer to a session id it does not know (a JSON-RPC error, 404)."""
    body = JSONRPCError(
        jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message="Session not found")
    )
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=404,
        media_type="application/json",
    )


@dataclass(slots=True)
class _Tracked:
    principal: str
    last_used: float


class SessionQuota:
    """Binds legacy MCP sessions to their principal; bounds them per principal and in total."""

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
        # Least recently used first.
        self._sessions: OrderedDict[str, _Tracked] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Admit, count and pass on MCP requests; refuse a session past a quota."""
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        who: Principal = scope.get("state", {}).get(PRINCIPAL_STATE, ANONYMOUS)
        session_id = headers.get(_SESSION_HEADER)
        if session_id is not None:
            await self._in_session(session_id.decode("latin-1"), who, scope, receive, send)
            return
        version = headers.get(_VERSION_HEADER)
        opening = scope["method"] == "POST" and (
            version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
        )
        if not opening:
            await self.app(scope, receive, send)
            return
        refusal = await self._admit(who)
        if refusal is not None:
            status = 503 if refusal.details.get("limit") == "sessions_total" else 429
            response = JSONResponse(refusal.to_response(), status_code=status)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, self._learning(send, who))

    async def _in_session(
        self, session_id: str, who: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        tracked = self._sessions.get(session_id)
        if tracked is not None and tracked.principal != who.id:
            # Another credential naming the session learns nothing, not even that it exists.
            logger.warning("refused %s for MCP session %s: another principal", scope["method"],
                           session_id[:12])  # fmt: skip
            await unknown_session()(scope, receive, send)
            return
        if tracked is not None:
            tracked.last_used = self._clock()
            self._sessions.move_to_end(session_id)
        await self.app(scope, receive, send)

    def _learning(self, send: Send, who: Principal) -> Send:
        async def learn(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name == _SESSION_HEADER:
                        self._sessions[value.decode("latin-1")] = _Tracked(who.id, self._clock())
            await send(message)

        return learn

    async def _admit(self, who: Principal) -> BzzzError | None:
        """Room for one more session of ``who``, made by ending empty ones; else a refusal."""
        await self._reap()
        mine = [sid for sid, t in self._sessions.items() if t.principal == who.id]
        full = bool(self._per_principal) and len(mine) >= self._per_principal
        if full and not await self._end_one_empty(mine):
            return RateLimited(
                f"this credential already holds {len(mine)} MCP sessions with agents (at "
                f"most {self._per_principal}); end one, or use the sessionless protocol",
                details={"limit": "sessions_per_principal", "retry_after": self._idle},
            )
        full = bool(self._total) and len(self._sessions) >= self._total
        if full and not await self._end_one_empty(list(self._sessions)):
            return BzzzError(
                f"the node holds its maximum of {self._total} MCP sessions with agents; "
                "try again later",
                code=ErrorCode.RATE_LIMITED,
                details={"limit": "sessions_total", "retry_after": self._idle},
            )
        return None

    async def _end_one_empty(self, candidates: list[str]) -> bool:
        """End the least recently used of ``candidates`` (oldest first) that holds no agent."""
        for session_id in candidates:
            if not self._holds_agents(session_id):
                await self._end(session_id, "to make room for a new one")
                return True
        return False

    async def _reap(self) -> None:
        """Forget ended sessions; end those idle past the bound that hold no agent."""
        live = self._live()
        cutoff = self._clock() - self._idle
        for session_id, tracked in list(self._sessions.items()):
            if session_id not in live:
                del self._sessions[session_id]
            elif tracked.last_used < cutoff and not self._holds_agents(session_id):
                await self._end(session_id, "idle and without agents")

    async def _end(self, session_id: str, why: str) -> None:
        logger.info("ending MCP session %s: %s", session_id[:12], why)
        self._sessions.pop(session_id, None)
        transport = self._live().pop(session_id, None)
        if transport is not None:
            await transport.terminate()

    def _live(self) -> dict[str, StreamableHTTPServerTransport]:
        # The SDK keeps its open sessions in a private map; as in mcp/sessions.py, its own
        # tests reach it the same way, and there is no public accessor in 2.3.
        return self._manager._server_instances
