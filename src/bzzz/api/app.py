"""The Starlette app: /healthz, /metrics and MCP over streamable HTTP at /mcp."""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bzzz.domain import iso
from bzzz.mcp.server import BzzzMCP
from bzzz.node import Node

_PROTECTED = ("/mcp", "/webhooks")


class BearerAuth:
    """Requires ``Authorization: Bearer <token>`` on /mcp when tokens are configured."""

    def __init__(self, app: ASGIApp, tokens: list[str]) -> None:
        self.app = app
        self.tokens = [t.encode() for t in tokens]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass through authorized requests; answer 401 to the rest."""
        if scope["type"] == "http" and self.tokens and scope["path"].startswith(_PROTECTED):
            headers = dict(scope.get("headers", []))
            given = headers.get(b"authorization", b"").removeprefix(b"Bearer ").strip()
            if not any(hmac.compare_digest(given, token) for token in self.tokens):
                response = JSONResponse(
                    {
                        "success": False,
                        "error": "missing or invalid bearer token",
                        "code": "INVALID_PARAMETERS",
                    },
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _metrics(node: Node) -> str:
    status = node.status()
    projector = status.get("projector") or {}
    webhooks = status.get("webhooks") or {}
    lines = [
        "# TYPE bzzz_up gauge",
        f"bzzz_up {1 if node.healthy else 0}",
        "# TYPE bzzz_envelopes_applied_total counter",
        f"bzzz_envelopes_applied_total {projector.get('applied', 0)}",
        "# TYPE bzzz_log_applied_sequence gauge",
        f"bzzz_log_applied_sequence {projector.get('applied_sequence', 0)}",
        "# TYPE bzzz_envelopes_rejected_total counter",
    ]
    for reason, count in sorted((projector.get("rejected") or {}).items()):
        lines.append(f'bzzz_envelopes_rejected_total{{reason="{reason}"}} {count}')
    lines += [
        "# TYPE bzzz_webhook_deliveries_total counter",
        f'bzzz_webhook_deliveries_total{{outcome="delivered"}} {webhooks.get("delivered", 0)}',
        f'bzzz_webhook_deliveries_total{{outcome="failed_attempt"}} '
        f"{webhooks.get('failed_attempts', 0)}",
        f'bzzz_webhook_deliveries_total{{outcome="dead"}} {webhooks.get("dead", 0)}',
    ]
    threads = status.get("threads") or {}
    lines += [
        "# TYPE bzzz_thread_escalations_total counter",
        f"bzzz_thread_escalations_total {threads.get('escalations_fired', 0)}",
        "# TYPE bzzz_escalation_actions_total counter",
        f'bzzz_escalation_actions_total{{outcome="done"}} '
        f"{threads.get('escalation_actions_done', 0)}",
        f'bzzz_escalation_actions_total{{outcome="failed_attempt"}} '
        f"{threads.get('escalation_action_failures', 0)}",
    ]
    return "\n".join(lines) + "\n"


def build_app(node: Node, server: BzzzMCP, host: str) -> Starlette:
    """The node's HTTP app (MCP session manager started by its lifespan)."""
    # Plain JSON answers to POSTs: every tool answers at once (no progress to stream), and the
    # SDK's client then keeps one connection instead of opening one per call; notifications
    # (resources/updated) still travel on the session's GET stream.
    mcp_app = server.streamable_http_app(streamable_http_path="/mcp", host=host, json_response=True)

    async def healthz(request: Request) -> Response:
        body: dict[str, Any] = node.status()
        return JSONResponse(body, status_code=200 if node.healthy else 503)

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(_metrics(node), media_type="text/plain; version=0.0.4")

    async def webhooks(request: Request) -> Response:
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

    routes: list[Any] = [
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/webhooks", webhooks),
        Mount("/", app=mcp_app),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(BearerAuth, tokens=node.settings.node.auth_tokens)
    return app
