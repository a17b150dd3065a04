"""A bare MCPServer with one no-op tool, served the way `bzzz serve` serves MCP.

The baseline of bench/mcp_throughput.py: same SDK, same transport options as bzzz
(``streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")``: stateful sessions, SSE
responses), same Starlette layout (``/healthz`` route first, then ``Mount("/")``), same uvicorn
settings. Only the tool differs: it does nothing.

    python bench/noop_server.py --port 8765
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

HOST = "127.0.0.1"


def build_app(json_response: bool = False) -> Starlette:
    """The no-op MCP server mounted like bzzz's node app (``json_response``: an experiment)."""
    server = MCPServer("noop", version="0.1.0", log_level="WARNING")

    @server.tool(name="noop", description="Does nothing and answers at once.")
    async def noop(text: str = "") -> dict[str, Any]:
        return {"success": True, "echo_length": len(text)}

    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", host=HOST, json_response=json_response
    )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"healthy": True})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return Starlette(
        routes=[Route("/healthz", healthz), Mount("/", app=mcp_app)], lifespan=lifespan
    )


def main() -> None:
    """Serve until SIGINT/SIGTERM (uvicorn handles both)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="answer POSTs with plain JSON instead of SSE (bzzz uses SSE; for comparison only)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = uvicorn.Config(
        build_app(json_response=args.json_response),
        host=HOST,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=3,
        lifespan="on",
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
