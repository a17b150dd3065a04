"""`bzzz serve`: run the node, MCP over streamable HTTP at /mcp (with REST and the dashboard)
or over stdin/stdout (``--stdio``).

The web server, the MCP SDK and the node are imported when the command runs, never for its
``--help``. The CLI owns SIGINT and SIGTERM: they stop the web server, then the node.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bzzz.cli import serving as serving
from bzzz.cli import start as start
from bzzz.errors import ConfigError

if TYPE_CHECKING:
    from bzzz.config import Settings

logger = logging.getLogger("bzzz")


def add_parser(sub: Any) -> None:
    """The `serve` command."""
    serve = sub.add_parser("serve", help="run the node (MCP over HTTP at /mcp, or --stdio)")
    serve.add_argument("--stdio", action="store_true", help="MCP over stdin/stdout")
    serve.add_argument(
        "--port", type=port_number, help="HTTP port (or BZZZ_HTTP_PORT; default 7331)"
    )
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")


def port_number(text: str) -> int:
    """A TCP port (0 picks a free one): argparse then names ``--port`` in its error."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the node until a signal stops it."""
    _setup_logging(settings)
    # A served node spends much of each call in the event loop and its sockets (HTTP, NATS):
    # uvloop roughly halves that (measured in BENCHMARKS.md).
    with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
        if args.stdio:
            runner.run(_run_until_signal(_serve_stdio(settings)))
        else:
            runner.run(_serve_http(settings))
    return 0


def _setup_logging(settings: Settings) -> None:
    # stdout belongs to the MCP stdio transport: logs go to stderr or the (rotating) file.
    from bzzz.metrics.logs import configure

    configure(settings.logging)


async def _serve_stdio(settings: Settings) -> None:
    from mcp.server.stdio import stdio_server

    from bzzz.mcp import stdio
    from bzzz.mcp.server import build_server
    from bzzz.node.core import Node

    # stdout is claimed first: nothing the node starts (nats-server included) inherits it.
    with stdio.claimed_stdout() as wire:
        async with start.started(Node(settings, address="stdio")) as node:
            with _serving(node, {"transport": "stdio"}):
                server, _ = build_server(node)
                lowlevel = server._lowlevel_server
                pending = stdio.Pending()
                lines = stdio.StdinLines(await stdio.stdin_source(), pending)
                # stdio_server accepts any async line iterator and writer as stdin and stdout.
                async with stdio_server(
                    stdin=lines,  # type: ignore[arg-type]
                    stdout=stdio.StdoutWriter(wire, pending),  # type: ignore[arg-type]
                ) as (read, write):
                    await lowlevel.run(read, write, lowlevel.create_initialization_options())


async def _serve_http(settings: Settings) -> None:
    from bzzz.api.app import build_app
    from bzzz.api.server import http_server
    from bzzz.mcp.server import build_server
    from bzzz.metrics.logs import RequestIds
    from bzzz.node.core import Node

    host = settings.node.http_host
    check_exposure(settings)
    listener = start.listen(host, settings.node.http_port)
    # The real port (port 0 picks one), so peers see it in this node's address.
    port = listener.getsockname()[1]
    shown = serving.urls(host, port)
    address = shown["mcp_url"]
    try:
        async with start.started(Node(settings, address=address)) as node:
            server, _ = build_server(node)
            app = build_app(node, server, host, address.removesuffix("/mcp"))
            # uvicorn with the node's bounds (bzzz.api.server says which and why).
            web = http_server(RequestIds(app), listener, settings.limits)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, setattr, web, "should_exit", True)
            logger.info("MCP at %s", address)
            logger.info("dashboard at %s (REST at %s)", shown["dashboard_url"], shown["api_url"])
            with _serving(node, {"transport": "http", "host": host, "port": port, **shown}):
                await web.serve(sockets=[listener])
    finally:
        listener.close()


def _serving(node: Any, facts: dict[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """The running node's serving file (cli/serving.py): where `bzzz config show` and
    `bzzz status` find what it runs with."""
    return serving.serving(
        node.settings.node.data_dir.expanduser(),
        {"slot": node.slot, "node_id": node.node_id, "network": node.network, **facts},
    )


def check_exposure(settings: Settings) -> None:
    """A node reachable from other machines must ask for credentials."""
    from bzzz.access.service import serves_loopback_only

    auth, host = settings.auth, settings.node.http_host
    if serves_loopback_only(host):
        return
    if auth.required is False:
        raise ConfigError(
            f"refusing to serve {host} with auth.required = false: a node reachable from "
            "other machines must require credentials"
        )
    if not (settings.node.auth_tokens or auth.issuer or auth.required):
        raise ConfigError(
            f"refusing to serve {host} without credentials: set BZZZ_AUTH_TOKENS, "
            "BZZZ_AUTH_ISSUER, or BZZZ_AUTH_REQUIRED=true with network tokens"
        )


async def _run_until_signal(coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (a pinned dependency off Windows), else asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
