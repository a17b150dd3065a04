"""Bounds on what one request may cost the node: its body, and how many are served at once.

``BodyLimit`` counts a body while it is read: a declared ``Content-Length`` past the limit is
answered 413 before the route runs; a chunked body is answered 413 as soon as the count passes
the limit, the route never sees the body end (the client is gone at its next read), and the
connection closes: nothing more is read or kept.

``JsonDepthLimit`` refuses a JSON body nested deeper than ``MAX_JSON_DEPTH`` (64) levels before
any route parses it: a cheap scan of the bytes, never a recursive parse.

``RequestLimit`` bounds the requests served at once. It counts requests whose head has
arrived, never connections: a socket that sends nothing holds no slot (uvicorn's own
``limit_concurrency`` counts every open connection, so idle sockets locked clients out).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcp_types import INVALID_PARAMS
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bzzz.errors import BzzzError, ErrorCode, InvalidParameters
from bzzz.schemas import MAX_JSON_DEPTH, too_deep_error

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


# --- JSON depth -------------------------------------------------------------------------------

# A JSON string (escapes included), a bracket, a colon or comma, or a scalar's text.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+', re.DOTALL)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
# Tokens the refusal's second look reads at most (it names the field, the request id).
_WALK_TOKENS = 200_000
# The JSON-RPC envelope above a tool's arguments: the request and its params.
_ENVELOPE_LEVELS = 2
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def nests_within(body: bytes, limit: int) -> bool:
    """Whether a JSON text nests at most ``limit`` levels of objects and arrays (strings
    skipped); C-speed passes over the bytes, never a parse."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return True
    brackets = _STRING.sub(b"", body).translate(_BRACKETS, _NOT_BRACKETS)
    # Each pass removes the innermost pairs: the passes that empty it are its depth.
    for _ in range(limit):
        if not brackets:
            return True
        brackets = brackets.replace(b"()", b"")
    return not brackets


@dataclass(slots=True)
class DeepPoint:
    """Where a JSON text first nests past the limit: the path of keys down to it, and the
    request's ``id`` and ``method`` when the root object names them (JSON-RPC)."""

    path: list[str]
    root_is_object: bool = True
    request_id: Any = None
    method: str | None = None


def _scalar(token: bytes) -> Any:
    try:
        return json.loads(token) if len(token) <= 256 else None
    except ValueError:
        return None


class _Walk:
    """A JSON text read token by token with a list for a stack: the path of keys, the root's
    ``id`` and ``method``, and the first point past a depth."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.frames: list[list[Any]] = []  # [is_object, key or index, expecting a key]
        self.root: dict[str, Any] = {}
        self.found: DeepPoint | None = None

    def token(self, token: bytes) -> None:
        """Take one token."""
        first, frames = token[:1], self.frames
        if first in (b"{", b"["):
            if self.found is None and len(frames) >= self.limit:
                self.found = DeepPoint([str(f[1])[:64] for f in frames], frames[0][0])
            frames.append([first == b"{", None if first == b"{" else 0, first == b"{"])
        elif not frames:
            return
        elif first in (b"}", b"]"):
            frames.pop()
        elif token in (b",", b":"):
            top = frames[-1]
            if top[0]:
                top[2] = token == b","
            elif token == b",":
                top[1] += 1
        elif frames[-1][0] and frames[-1][2]:
            key = _scalar(token)
            frames[-1][1] = key if isinstance(key, str) else "?"
        elif len(frames) == 1 and frames[0][1] in ("id", "method"):
            self.root[frames[0][1]] = _scalar(token)

    @property
    def done(self) -> bool:
        """Found, and the root's id and method known (JSON-RPC names them first)."""
        return self.found is not None and "id" in self.root and "method" in self.root


def deep_point(body: bytes, limit: int) -> DeepPoint | None:
    """The first point of ``body`` nested past ``limit`` levels (None: none is, the brackets
    do not balance); a walk bounded in tokens, never a recursive parse."""
    walk = _Walk(limit)
    for count, match in enumerate(_TOKEN.finditer(body)):
        if count >= _WALK_TOKENS:
            # Too long to say where: the byte scan found it too deep, which is enough.
            walk.found = walk.found or DeepPoint([])
            break
        walk.token(match.group())
        if walk.done:
            break
    found = walk.found
    if found is not None:
        method = walk.root.get("method")
        found.request_id = walk.root.get("id")
        found.method = method if isinstance(method, str) else None
    return found


def _field(point: DeepPoint, mcp: bool) -> str:
    """The argument (or body field) that holds the too-deep point."""
    path = point.path
    if mcp:
        if path[:2] == ["params", "arguments"] and len(path) > 2:
            return path[2]
        return ".".join(path[:2]) or "body"
    return path[0] if path and point.root_is_object else "body"


def too_deep_answer(point: DeepPoint, limit: int, mcp: bool) -> Response:
    """The refusal of a body nested too deep: on /mcp the answer a JSON-RPC client reads for
    its request (a tool call's isError result; else an INVALID_PARAMS error); elsewhere the
    seed's ErrorResponse (400)."""
    error = too_deep_error(_field(point, mcp), limit)
    if not mcp:
        return JSONResponse(error.to_response(), status_code=400)
    payload = error.to_response()
    request_id = point.request_id
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    if point.method == "tools/call" and request_id is not None:
        result = {
            "content": [{"type": "text", "text": json.dumps(payload)}],
            "structuredContent": payload,
            "isError": True,
        }
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})
    rpc_error = {
        "code": INVALID_PARAMS,
        "message": f"{error.code}: {error.message}",
        "data": payload,
    }
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": rpc_error}, status_code=400)


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # no type: the routes read JSON


class JsonDepthLimit:
    """Refuses a JSON body nested deeper than ``limit`` before any route parses it.

    The body is read whole here (``BodyLimit`` outside bounds it) and handed on unchanged.
    ``/mcp`` counts from a tool's arguments: the JSON-RPC request and its params add two.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_JSON_DEPTH, mcp_path: str = "/mcp") -> None:
        self.app = app
        self.limit = limit
        self.mcp_path = mcp_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a body within the limit on; answer one past it."""
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        mcp = scope["path"].rstrip("/") == self.mcp_path
        limit = self.limit + (_ENVELOPE_LEVELS if mcp else 0)
        if messages[-1]["type"] == "http.request" and not nests_within(body, limit):
            point = deep_point(body, limit)
            # None: brackets that do not balance, which the route's parser refuses as such.
            if point is not None:
                await too_deep_answer(point, self.limit, mcp)(scope, receive, send)
                return
        await self.app(scope, _replay(messages, receive), send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that hands out the body read already as one message, then reads on."""
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    first: list[Message] = (
        [{"type": "http.request", "body": body, "more_body": False}]
        if messages[-1]["type"] == "http.request"
        else [*messages]
    )

    async def replayed() -> Message:
        if first:
            return first.pop(0)
        return await receive()

    return replayed
