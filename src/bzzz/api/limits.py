"""Bounds on what one request may cost the node: its body, and how many are served at once.

``BodyLimit`` counts a body while it is read: a declared ``Content-Length`` past the limit is
answered 413 before the route runs; a chunked body is answered 413 as soon as the count passes
the limit, the route never sees the body end (the client is gone at its next read), and the
connection closes: nothing more is read or kept.

``RequestLimit`` bounds the requests served at once. It counts requests whose head has
arrived, never connections: a socket that sends nothing holds no slot (uvicorn's own
``limit_concurrency`` counts every open connection, so idle sockets locked clients out).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bzzz.errors import BzzzError, ErrorCode, InvalidParameters

_DISCONNECT: Message = {"type": "http.disconnect"}


def too_large(limit: int) -> JSONResponse:
    """The 413 answer: the seed's ErrorResponse, and the connection closes (the rest of the
    body is not read)."""
    error = InvalidParameters(
        f"request body too large (at most {limit} bytes)",
        details={"field": "body", "limit": limit},
    )
    return JSONResponse(error.to_response(), status_code=413, headers={"Connection": "close"})


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP parser refuses it before any app runs
    return None


class BodyLimit:
    """Answers 413 once a request's body passes ``limit`` bytes, counted as it is read."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a declared length past the limit; count the rest as the route reads it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.limit:
            await too_large(self.limit)(scope, receive, send)
            return
        await _Counted(self.app, self.limit, receive, send).run(scope)


class _Counted:
    """One request whose body is counted; past the limit it is answered here."""

    def __init__(self, app: ASGIApp, limit: int, receive: Receive, send: Send) -> None:
        self._app = app
        self._limit = limit
        self._receive = receive
        self._send = send
        self._scope: Scope = {}
        self._read = 0
        self._over = False
        self._app_answering = False
        self._answered_here = False

    async def run(self, scope: Scope) -> None:
        """Run the app with the counting receive and the send that yields to a 413."""
        self._scope = scope
        await self._app(scope, self.receive, self.send)

    async def receive(self) -> Message:
        """The next body chunk; past the limit, the 413 goes out and the app sees the client
        leave (as uvicorn tells it once a response is complete)."""
        if self._over:
            return _DISCONNECT
        message = await self._receive()
        if message["type"] != "http.request":
            return message
        self._read += len(message.get("body", b""))
        if self._read <= self._limit:
            return message
        self._over = True
        if not self._app_answering:
            self._answered_here = True
            await too_large(self._limit)(self._scope, self._receive, self._send)
        # The chunk that crossed the limit still goes to the app, never the end of the body:
        # an app with a limit of its own (the MCP SDK's) refuses it quietly; any other sees
        # the client leave at its next read.
        return message

    async def send(self, message: Message) -> None:
        """Pass the app's answer on, unless the 413 answered already."""
        if self._answered_here:
            return
        if message["type"] == "http.response.start":
            self._app_answering = True
        await self._send(message)


class RequestLimit:
    """At most ``limit`` requests served at once; past it 503 with Retry-After."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.serving = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request within the bound, or refuse it at once."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.serving >= self.limit:
            error = BzzzError(
                f"the node serves {self.limit} requests at once; try again shortly",
                code=ErrorCode.RATE_LIMITED,
                details={"limit": "http_connections", "retry_after": 1},
            )
            response: Any = JSONResponse(
                error.to_response(), status_code=503, headers={"Retry-After": "1"}
            )
            await response(scope, receive, send)
            return
        self.serving += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.serving -= 1
