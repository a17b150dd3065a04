"""Starting nodes: `bzzz serve` (the HTTP port bound first, the start shown on a terminal) and
the tool node a CLI command joins the network with."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from bzzz import cli_output as out
from bzzz.errors import ConfigError


def listen(host: str, port: int) -> socket.socket:
    """Bind the HTTP port before the node joins the network: a busy port stops nothing late."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {os.strerror(exc.errno) if exc.errno else exc} "
            "(another bzzz serve? choose a port with --port or BZZZ_HTTP_PORT)"
        ) from None


@contextlib.asynccontextmanager
async def started(node: Any) -> AsyncIterator[Any]:
    """Start ``node``, showing its progress (store, catch-up with the log) on a terminal."""
    shown = asyncio.create_task(show_start(node)) if sys.stderr.isatty() else None
    try:
        async with node:
            if shown is not None:
                shown.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await shown
            yield node
    finally:
        if shown is not None:
            shown.cancel()


async def show_start(node: Any) -> None:
    """A progress bar on stderr while ``node`` opens its store and catches up with the log."""
    # The node reports no progress events: its applied sequence is read a few times a second,
    # only for the eyes of someone at a terminal.
    with out.progress("starting: opening the store") as update:
        while getattr(node, "projector", None) is None:
            migrations = getattr(getattr(node, "db", None), "migrations", None)
            if migrations is not None and migrations.total:
                update(migrations.done, total=migrations.total, description="migrating the store")
            await asyncio.sleep(0.02)
        update(0, description="catching up with the log")
        last = await node.bus.last_sequence()
        while True:
            update(min(node.projector.applied_sequence, last), total=last)
            await asyncio.sleep(0.2)


async def with_tool_node(
    settings: Any, args: Any, command: Callable[[Any, Any], Awaitable[int]]
) -> int:
    """Run one CLI ``command(args, node)`` on a tool node that joins the network for it."""
    from bzzz.node import Node

    async with Node(settings, address="cli", tool=True) as node:
        return await command(args, node)
