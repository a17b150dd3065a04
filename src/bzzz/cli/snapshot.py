"""`bzzz snapshot [--project P]`: write a snapshot of this node's projects now.

The command joins the network as a tool node of the data directory (beside a running node,
or on the embedded server for the time of the command), catches up with the log — from the
newest snapshot itself when its store is new — and writes the snapshot of the projects the
settings serve (``bzzz.projects``) to the network's object store. It acts as the local user
of the data directory (an admin of every project) and is recorded on the audit trail.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `snapshot` command."""
    snapshot = sub.add_parser(
        "snapshot", help="write a snapshot of this node's projects to the network's object store"
    )
    snapshot.add_argument(
        "--project", help="a project the snapshot must cover (one this node serves)"
    )
    out.json_flag(snapshot, '{"covers": ..., "sequence": N, "rows": N, "bytes": N, ...}')


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz snapshot`."""
    return asyncio.run(start.with_tool_node(settings, args, _write))


async def _write(args: argparse.Namespace, node: Any) -> int:
    from bzzz.principal import LOCAL

    written = await node.snapshots.write(LOCAL, args.project)
    if args.json:
        out.print_json(written)
        return 0
    sys.stdout.write(
        f"wrote the snapshot of projects {written['covers']} at log sequence "
        f"{written['sequence']}: {written['rows']} rows, {written['bytes']} bytes "
        f"in {written['seconds']} s\n"
    )
    return 0
