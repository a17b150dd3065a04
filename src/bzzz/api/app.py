"""The Starlette app: /healthz, /metrics and MCP over streamable HTTP at /mcp."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bzzz.access.keys import session_key
from bzzz.access.oauth import protected_resource_metadata, www_authenticate
from bzzz.access.service import AccessService, serves_loopback_only
from bzzz.api.a2a import a2a_routes
from bzzz.api.audit import AuditHTTP
from bzzz.api.limits import BodyLimit, JsonDepthLimit, RequestLimit
from bzzz.api.routes import api_routes
from bzzz.api.sessions import SessionQuota
from bzzz.api.ui import UI_PATH
from bzzz.domain import iso
from bzzz.errors import BzzzError, InvalidParameters, PermissionDenied, Unauthenticated
from bzzz.mcp.server import BzzzMCP
from bzzz.mcp.sessions import PRINCIPAL_STATE, principal_of
from bzzz.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from bzzz.metrics import render_metrics
from bzzz.node.core import Node
from bzzz.principal import ANONYMOUS, Principal

RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
# JSON-RPC's range for a server's own errors (-32000 to -32099): no credential, or a bad one.
UNAUTHENTICATED_RPC = -32001
SCOPES_SUPPORTED = ["bzzz:read", "bzzz:write", "bzzz:admin", "bzzz:project:*", "bzzz:role:*"]

# Open to anyone: liveness, and where a client learns how to get a credential.
OPEN_PATHS = frozenset(
    {"/healthz", "/openapi.json", RESOURCE_METADATA_PATH, f"{RESOURCE_METADATA_PATH}/mcp"}
)


def is_open(path: str) -> bool:
    """Whether a path answers without a credential: the open ones and the dashboard's files
    (the page holds no data; it reads /api/v1 with the token it signs in with)."""
    # A signed link's signature is its credential (bzzz.conversations.pagelinks).
    if path.startswith("/api/v1/signed/"):
        return True
    return path in OPEN_PATHS or path == UI_PATH or path.startswith(f"{UI_PATH}/")


# Credentials travel in the Authorization header only: a URL ends up in logs and histories.
_QUERY_CREDENTIALS = frozenset({"access_token", "token", "api_key", "apikey", "key", "auth"})


def error_response(
    error: BzzzError, status: int, headers: dict[str, str] | None = None
) -> Response:
    """The seed's ErrorResponse as an HTTP answer."""
    return JSONResponse(error.to_response(), status_code=status, headers=headers)


def mcp_refusal(error: BzzzError, headers: dict[str, str]) -> Response:
    """A 401 at /mcp as a JSON-RPC error whose message says what to do, the ErrorResponse in
    its data: MCP clients show a JSON-RPC error body (the Python SDK raises it as MCPError)
    and only a generic "Server returned an error response" for any other 401 body."""
    body = {
        "jsonrpc": "2.0",
        "id": None,  # the request is not read: clients answer the request they sent
        "error": {
            "code": UNAUTHENTICATED_RPC,
            "message": f"{error.code}: {error.message}",
            "data": error.to_response(),
        },
    }
    return JSONResponse(body, status_code=401, headers=headers)


class Authenticate:
    """Resolves each request's credential to a principal, left in ``scope["state"]``.

    A missing credential on a node that requires one, or any bad credential, is 401 with
    ``WWW-Authenticate: Bearer resource_metadata="…"`` (RFC 9728); the routes and the MCP
    tools then apply the principal's grants.
    """

    def __init__(
        self, app: ASGIApp, access: AccessService, metadata_url: str, metrics_public: bool
    ) -> None:
        self.app = app
        self.access = access
        self.metadata_url = metadata_url
        self.metrics_public = metrics_public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass on with the principal set; answer 401 to the rest."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [v for k, v in scope.get("headers", []) if k == b"authorization"]
        if len(headers) > 1:
            # Which one counts would depend on who reads them: refuse the ambiguity.
            refusal = InvalidParameters(
                "send one Authorization header, not several",
                details={"field": "Authorization", "count": len(headers)},
            )
            await error_response(refusal, 400)(scope, receive, send)
            return
        path = scope["path"]
        if is_open(path) or (path == "/metrics" and self.metrics_public):
            await self.app(scope, receive, send)
            return
        header = headers[0].decode("latin-1") if headers else None
        try:
            who = await self._principal(scope, header)
        except Unauthenticated as exc:
            error = "invalid_token" if exc.details.pop("invalid_token", False) else None
            challenge = {"WWW-Authenticate": www_authenticate(self.metadata_url, error)}
            answer = (
                mcp_refusal(exc, challenge)
                if path == MCP_PATH
                else error_response(exc, 401, challenge)
            )
            await answer(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE] = who
        await self.app(scope, receive, send)

    async def _principal(self, scope: Scope, header: str | None) -> Principal:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if _QUERY_CREDENTIALS & {k.lower() for k in query}:
            raise Unauthenticated(
                "credentials in the query string are refused; send 'Authorization: Bearer <token>'",
                details={"missing": "credential", "invalid_token": True},
            )
        try:
            who = await self.access.authenticate(header)
        except Unauthenticated as exc:
            exc.details.setdefault("missing", "credential")
            exc.details["invalid_token"] = header is not None
            raise
        if who is None and scope["path"] == "/metrics" and not self.metrics_public:
            raise Unauthenticated(
                "/metrics needs a credential on this node", details={"missing": "credential"}
            )
        return who or ANONYMOUS


async def _metrics(node: Node) -> str:
    """The /metrics text (bzzz.metrics renders it)."""
    return await render_metrics(node)


async def _no_route(request: Request, exc: Exception) -> Response:
    """An unknown path (404) or method (405) answered as the seed's ErrorResponse."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    what = "method" if status == 405 else "route"
    error = InvalidParameters(f"no {what} {request.method} {request.url.path}")
    headers = exc.headers if isinstance(exc, HTTPException) else None
    return JSONResponse(error.to_response(), status_code=status, headers=headers)


ROUTING_ERRORS: dict[Any, Any] = {404: _no_route, 405: _no_route}


def build_app(node: Node, server: BzzzMCP, host: str, base_url: str | None = None) -> Starlette:
    """The node's HTTP app (MCP session manager started by its lifespan).

    ``base_url``: where clients reach this node (``auth.public_url`` wins), for the OAuth
    protected-resource metadata.
    """
    # Plain JSON answers to POSTs: every tool answers at once (no progress to stream), and the
    # SDK's client then keeps one connection instead of opening one per call; notifications
    # (resources/updated) still travel on the session's GET stream.
    limits = node.settings.limits
    security = transport_security(host, node.settings.auth.public_url)
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        json_response=True,
        transport_security=security,
        max_request_body_size=limits.http_max_body_bytes,
        max_sessions=limits.sessions_total or None,
    )

    async def healthz(request: Request) -> Response:
        body: dict[str, Any] = node.status()
        return JSONResponse(body, status_code=200 if node.healthy else 503)

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(await _metrics(node), media_type=METRICS_CONTENT_TYPE)

    async def webhooks(request: Request) -> Response:
        who = principal_of(request)
        if not who.is_admin_of(None):
            return error_response(
                PermissionDenied(
                    "webhook deliveries are shown to admins of every project",
                    details={"missing": "scope:admin"},
                ),
                403,
            )
        status = request.query_params.get("status")
        if status not in (None, "pending", "delivered", "dead"):
            return JSONResponse(
                {
                    "success": False,
                    "error": "status must be pending, delivered or dead",
                    "code": "INVALID_PARAMETERS",
                },
                status_code=400,
            )
        rows = await node.subscriptions.deliveries(status, 200)
        return JSONResponse(
            {
                "success": True,
                "deliveries": [
                    {
                        "id": d.id,
                        "subscription_id": d.subscription_id,
                        "event_id": d.event_id,
                        "url": d.url,
                        "status": d.status,
                        "attempts": d.attempts,
                        "next_attempt_at": iso(d.next_attempt_at),
                        "last_error": d.last_error,
                        "created_at": iso(d.created_at),
                        "finished_at": iso(d.finished_at),
                    }
                    for d in rows
                ],
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    auth = node.settings.auth
    base = (auth.public_url or base_url or f"http://{host}").rstrip("/")

    async def resource_metadata(request: Request) -> Response:
        metadata = protected_resource_metadata(f"{base}/mcp", auth.issuer, SCOPES_SUPPORTED)
        return JSONResponse(metadata | {"resource_name": "BZZZ node"})

    # The MCP endpoint first: every tool call is matched against the routes in order (it was
    # ~100 function calls a call behind the REST routes). Without the SDK's own auth its app
    # holds that one route and no middleware, which taking its routes would drop.
    if mcp_app.user_middleware:
        raise RuntimeError("the MCP app carries middleware; mount it instead of its routes")
    routes: list[Any] = [
        *mcp_app.routes,
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/webhooks", webhooks),
        Route(RESOURCE_METADATA_PATH, resource_metadata),
        # RFC 9728 §3.1 places a resource's metadata before its path: the MCP endpoint's too.
        Route(f"{RESOURCE_METADATA_PATH}/mcp", resource_metadata),
        *api_routes(node, auth.public_url or base_url),
        # A2A: every agent's card and JSON-RPC endpoint under /a2a (bzzz.api.a2a).
        *a2a_routes(node, auth.public_url or base_url),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=ROUTING_ERRORS)

    def holds_agents(session_id: str) -> bool:
        key = session_key("mcp", session_id)
        return bool(node.agents.directory.of_session(node.node_id, key))

    # Innermost: a body nested too deep is refused before any route parses it (after the
    # credential is checked; BodyLimit, outside, bounds what it reads).
    app.add_middleware(JsonDepthLimit)
    # Inside Authenticate (added last, so it runs first): the quota needs the principal.
    app.add_middleware(
        SessionQuota,
        manager=server.session_manager,
        per_principal=limits.sessions_per_principal,
        total=limits.sessions_total,
        idle_seconds=limits.idle_session_seconds,
        holds_agents=holds_agents,
    )
    loopback = serves_loopback_only(host)
    metrics_public = auth.metrics_public if auth.metrics_public is not None else loopback
    app.add_middleware(
        Authenticate,
        access=node.access,
        metadata_url=f"{base}{RESOURCE_METADATA_PATH}",
        metrics_public=metrics_public,
    )
    # Every route's body is counted as it is read (413 past the limit, recorded by the audit).
    app.add_middleware(BodyLimit, limit=limits.http_max_body_bytes)
    app.add_middleware(AuditHTTP, trail=node.audit, clock=node.clock)
    # A request with a foreign Host or Origin reaches no route (as /mcp refuses it).
    app.add_middleware(HostCheck, security=security)
    # Outermost: requests served at once (connections that sent nothing are not requests).
    app.add_middleware(RequestLimit, limit=limits.http_connections)
    return app


def transport_security(host: str, public_url: str | None) -> TransportSecuritySettings | None:
    """DNS-rebinding protection for every route: loopback names on a loopback node, the
    public URL's host when one is configured; None (off) otherwise, where auth applies."""
    if serves_loopback_only(host):
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[
                "127.0.0.1:*",
                "localhost:*",
                "[::1]:*",
                "127.0.0.1",
                "localhost",
                "[::1]",
            ],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    if public_url:
        parts = urlsplit(public_url)
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[parts.netloc, f"{parts.hostname}:*", f"{host}:*"],
            allowed_origins=[f"{parts.scheme}://{parts.netloc}"],
        )
    return None


class HostCheck:
    """The MCP endpoint's Host and Origin checks, applied to every other route too."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings | None) -> None:
        self.app = app
        self.check = TransportSecurityMiddleware(security) if security else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a foreign Host (421) or Origin (403) before any route sees the request."""
        if self.check is not None and scope["type"] == "http":
            refusal = await self.check.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
