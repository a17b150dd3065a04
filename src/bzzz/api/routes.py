"""The node's HTTP API in one list of routes: WHOOSH, /api/v1, the event stream, /openapi.json."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bzzz.api import (
    console,
    dashboard,
    escalations,
    inbox,
    knowledge,
    replay,
    reservations,
    rest,
    stream,
    whoosh,
)
from bzzz.api.handlers import Operation, routes_of
from bzzz.api.openapi import OPENAPI_PATH, document
from bzzz.api.ui import ui_routes
from bzzz.node.core import Node


def operations(node: Node) -> list[Operation]:
    """Every API operation of ``node``."""
    return (
        whoosh.operations(node)
        + rest.operations(node)
        + dashboard.operations(node)
        + console.operations(node)
        + stream.operations(node)
        + replay.operations(node)
        + reservations.operations(node)
        + escalations.operations(node)
        + inbox.operations(node)
        + knowledge.operations(node)
    )


def api_routes(node: Node, base_url: str | None = None) -> list[Any]:
    """The API's Starlette routes, /openapi.json describing them and the node's others, and
    the dashboard's page (/ui)."""
    ops = operations(node)
    spec = document(ops, base_url)

    async def openapi(request: Request) -> Response:
        return JSONResponse(spec)

    return [
        *routes_of(ops),
        Route(OPENAPI_PATH, openapi, methods=["GET"]),
        *ui_routes(lambda: node.access.required),
    ]
