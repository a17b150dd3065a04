"""Starting nodes and opening stores for the CLI.

`bzzz serve` binds its HTTP port first and shows its start on a terminal; the read commands
open the data directory's store alone (``require_node``, ``read_store``: no node starts, a
running one is not disturbed); a command that needs a whole node joins the network with a tool
node (``with_tool_node``). The libraries come in inside the functions that use them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bzzz.cli import output as out
from bzzz.errors import BzzzError, ConfigError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from bzzz.config import Settings
    from bzzz.store.database import Database

T = TypeVar("T")


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
    from bzzz.node.core import Node

    async with Node(settings, address="cli", tool=True) as node:
        return await command(args, node)


def require_node(settings: Settings, needs: str = "bzzz.db") -> Path:
    """The data directory, if a node has run there; else say so (nothing is created)."""
    data_dir = settings.node.data_dir.expanduser()
    if needs == "bzzz.db" and settings.node.database_url:
        return data_dir
    if not (data_dir / needs).is_file():
        raise BzzzError(
            f"no node in {data_dir}: it holds no {needs} (start one there with `bzzz serve`, "
            "or name another with --data-dir / BZZZ_DATA_DIR)",
            details={"data_dir": str(data_dir)},
        )
    return data_dir


@contextlib.asynccontextmanager
async def opened_store(settings: Settings) -> AsyncIterator[Database]:
    """The data directory's store, open (and migrated) for the time of a command."""
    from bzzz.network.sealing import keyring_of
    from bzzz.store.database import Database

    db = Database(settings.database_url(), keyring_of(settings, create=False))
    try:
        with out.progress("opening the store (migrations)"):
            await db.open()
        yield db
    finally:
        await db.close()


async def read_store(settings: Settings, query: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """``query`` in one session of the data directory's store (a node must have run there)."""
    require_node(settings)
    async with opened_store(settings) as db, db.session() as session:
        return await query(session)
