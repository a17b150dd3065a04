"""The audit of HTTP calls: every change (a request other than GET, HEAD, OPTIONS) outside /mcp.

An ASGI middleware beside the app it wraps; it records on ``bzzz.audit``'s trail.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bzzz.access.keys import session_key
from bzzz.audit.records import Action, digest, stamp
from bzzz.audit.trail import AuditTrail
from bzzz.clock import Clock, SystemClock
from bzzz.mcp.sessions import PRINCIPAL_STATE
from bzzz.principal import Principal

READS = frozenset({"GET", "HEAD", "OPTIONS"})
# A route that answers a refusal with HTTP 200 (JSON-RPC: A2A) names the outcome here.
OUTCOME_STATE = "bzzz_audit_outcome"


def _outcome(status: int) -> str:
    return "ok" if status < 400 else f"HTTP_{status}"


class AuditHTTP:
    """ASGI middleware: records method, path, principal and status of each HTTP change.

    Placed outside the auth middleware, so refused requests are recorded too; the principal
    is read from the scope's state after the request, where that middleware left it.
    """

    def __init__(self, app: ASGIApp, trail: AuditTrail, clock: Clock | None = None) -> None:
        self.app = app
        self.trail = trail
        self.clock: Clock = clock or SystemClock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; record it when it is a change."""
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or scope["method"] in READS or path.startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._record(scope, path, status)

    def _record(self, scope: Scope, path: str, status: int) -> None:
        state = scope.get("state", {})
        who = state.get(PRINCIPAL_STATE)
        principal = who.id if isinstance(who, Principal) else "unauthenticated"
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        params: dict[str, Any] = {"path": path, "query": dict(query)}
        session = "http"
        for name, value in scope.get("headers", []):
            if name == b"x-bzzz-session":
                session = session_key("http", value.decode("latin-1")[:64])
        self.trail.record(
            Action(
                at=stamp(self.clock.now()),
                principal=principal[:256],
                session=session,
                action=f"http:{scope['method']} {path}"[:128],
                outcome=str(state.get(OUTCOME_STATE) or _outcome(status))[:64],
                digest=digest(params),
                target=path[:512],
            )
        )
