"""The `bzzz` command: a thin layer over the node and its settings."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from bzzz import __version__
from bzzz.config import Settings, load_settings
from bzzz.errors import BzzzError

logger = logging.getLogger("bzzz")

EXIT_ERROR = 1
EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bzzz", description="BZZZ node: agents on a network")
    parser.add_argument("--version", action="version", version=f"bzzz {__version__}")
    parser.add_argument("--config", help="TOML settings file (or BZZZ_CONFIG)")
    parser.add_argument("--data-dir", help="data directory (or BZZZ_DATA_DIR)")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the node (MCP over HTTP at /mcp, or --stdio)")
    serve.add_argument("--stdio", action="store_true", help="MCP over stdin/stdout")
    serve.add_argument("--port", type=int, help="HTTP port (or BZZZ_HTTP_PORT; default 7331)")
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    webhooks = sub.add_parser("webhooks", help="webhook deliveries (the dead letters too)")
    webhooks.add_argument(
        "--status", choices=["pending", "delivered", "dead"], help="only this status"
    )
    webhooks.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    costs = sub.add_parser("costs", help="model spending today and this month, per model")
    costs.add_argument("--node", help="only this node's calls (a node id)")
    costs.add_argument("--json", action="store_true", help="print the CostUsage as JSON")
    config = sub.add_parser("config", help="settings")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_sub.add_parser("show", help="print the effective settings, secrets masked")
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    node: dict[str, Any] = {}
    if args.data_dir:
        node["data_dir"] = args.data_dir
    if getattr(args, "port", None) is not None:
        node["http_port"] = args.port
    if getattr(args, "host", None):
        node["http_host"] = args.host
    return {"node": node} if node else {}


def _setup_logging(settings: Settings) -> None:
    # stdout belongs to the MCP stdio transport: logs go to stderr or the configured file.
    handler: logging.Handler
    if settings.logging.file:
        Path(settings.logging.file).expanduser().parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(Path(settings.logging.file).expanduser())
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("bzzz").setLevel(settings.logging.level)


class _StdinLines:
    """stdin as an async iterator of lines on the event loop (cancellable, unlike a thread)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


async def _stdin_lines() -> _StdinLines | None:
    # The SDK reads stdin in a worker thread that a signal cannot interrupt; a pipe read on
    # the event loop can be cancelled, so SIGTERM stops the node even while stdin stays open.
    reader = asyncio.StreamReader(limit=1 << 24)
    pipe = os.fdopen(os.dup(0), "rb", buffering=0)
    try:
        await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except ValueError:
        # A regular file on stdin cannot be watched by the loop: let the SDK read it.
        pipe.close()
        return None
    return _StdinLines(reader)


async def _serve_stdio(settings: Settings) -> None:
    from mcp.server.stdio import stdio_server

    from bzzz.mcp.server import build_server
    from bzzz.node import Node

    async with Node(settings) as node:
        server, _ = build_server(node)
        lines = await _stdin_lines()
        if lines is None:
            await server.run_stdio_async()
            return
        lowlevel = server._lowlevel_server
        # stdio_server accepts any async line iterator as stdin.
        async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
            await lowlevel.run(read, write, lowlevel.create_initialization_options())


async def _serve_http(settings: Settings) -> None:
    import uvicorn

    class _QuietServer(uvicorn.Server):
        # uvicorn re-raises the signal it caught after its own shutdown, which would kill us
        # before the node stops; the CLI owns SIGINT/SIGTERM instead.
        def capture_signals(self) -> contextlib.nullcontext[None]:  # type: ignore[override]
            return contextlib.nullcontext()

    from bzzz.api.app import build_app
    from bzzz.mcp.server import build_server
    from bzzz.node import Node

    async with Node(settings) as node:
        server, _ = build_server(node)
        app = build_app(node, server, settings.node.http_host)
        config = uvicorn.Config(
            app,
            host=settings.node.http_host,
            port=settings.node.http_port,
            log_level="warning",
            timeout_graceful_shutdown=3,
            lifespan="on",
        )
        web = _QuietServer(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, setattr, web, "should_exit", True)
        logger.info("MCP at http://%s:%d/mcp", settings.node.http_host, settings.node.http_port)
        await web.serve()


async def _run_until_signal(coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    _setup_logging(settings)
    if args.stdio:
        asyncio.run(_run_until_signal(_serve_stdio(settings)))
    else:
        asyncio.run(_serve_http(settings))
    return 0


async def _deliveries(settings: Settings, status: str | None, limit: int) -> list[Any]:
    from bzzz.store.database import Database
    from bzzz.store.repository import Repository

    db = Database(settings.database_url())
    try:
        await db.open()
        async with db.session() as session:
            return await Repository(session).deliveries(status, limit)
    finally:
        await db.close()


def _webhooks(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console
    from rich.table import Table

    from bzzz.domain import iso

    rows = asyncio.run(_deliveries(settings, args.status, args.limit))
    table = Table(title=f"webhook deliveries ({args.status or 'all'})")
    for column in ("id", "status", "attempts", "url", "event", "next attempt", "last error"):
        table.add_column(column)
    for d in rows:
        table.add_row(
            str(d.id),
            d.status,
            str(d.attempts),
            d.url,
            d.event_id,
            iso(d.next_attempt_at) if d.status == "pending" else "",
            d.last_error or "",
        )
    Console().print(table)
    return 0


async def _usage(settings: Settings, node_id: str | None) -> list[dict[str, Any]]:
    from bzzz.domain import utcnow
    from bzzz.llm.costs import cost_usage, periods
    from bzzz.store.database import Database
    from bzzz.store.llm_repository import LLMRepository

    day, month = periods(utcnow())
    db = Database(settings.database_url())
    try:
        await db.open()
        async with db.session() as session:
            repo = LLMRepository(session)
            return [
                cost_usage(day, await repo.usage("day", day, node_id)),
                cost_usage(month, await repo.usage("month", month, node_id)),
            ]
    finally:
        await db.close()


def _costs(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console
    from rich.table import Table

    daily, monthly = asyncio.run(_usage(settings, args.node))
    if args.json:
        sys.stdout.write(json.dumps({"daily": daily, "monthly": monthly}, indent=2) + "\n")
        return 0
    scope = f"node {args.node}" if args.node else "all nodes"
    table = Table(title=f"model spending ({scope})")
    for column in ("period", "model", "calls", "tokens", "cost (USD)", "limit (USD)"):
        table.add_column(column, justify="left" if column in ("period", "model") else "right")
    limits = {
        daily["date"]: settings.cost.daily_limit,
        monthly["date"]: settings.cost.monthly_limit,
    }
    for usage in (daily, monthly):
        for model, spend in usage["models"].items():
            table.add_row(
                usage["date"],
                model,
                str(spend["calls"]),
                str(spend["tokens"]),
                f"{spend['cost']:.6f}",
                "",
            )
        limit = limits[usage["date"]]
        table.add_row(
            usage["date"],
            "[bold]total[/bold]",
            str(usage["apiCalls"]),
            str(usage["tokens"]["total"]),
            f"[bold]{usage['totalCost']:.6f}[/bold]",
            f"{limit:.2f}" if limit else "none",
        )
    Console().print(table)
    return 0


def _config_show(settings: Settings) -> int:
    from rich.console import Console
    from rich.syntax import Syntax

    text = json.dumps(settings.masked(), indent=2, default=str)
    if not sys.stdout.isatty():
        # Piped: plain JSON, never cropped to a console width.
        sys.stdout.write(text + "\n")
        return 0
    Console().print(Syntax(text, "json", word_wrap=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bzzz` command."""
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(args.config, overrides=_overrides(args))
        if args.command == "serve":
            return _serve(args, settings)
        if args.command == "webhooks":
            return _webhooks(args, settings)
        if args.command == "costs":
            return _costs(args, settings)
        return _config_show(settings)
    except BzzzError as exc:
        print(f"bzzz: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG if exc.code == "CONFIG_ERROR" else EXIT_ERROR
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
