"""`bzzz keys list|rotate`: the network data keys content is sealed under (never shown).

``list`` reads this data directory's keyring (ids and ages; no node starts). ``rotate`` joins
the network as a tool node (the running node's, or the embedded server for the time of the
command) and publishes the new key on the log: every node adds it in log order and seals new
writes with it; older keys keep reading. Both act as the local user of the data directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out

if TYPE_CHECKING:
    from bzzz.access.network_keys import KeyInfo
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `keys` command group."""
    keys = sub.add_parser("keys", help="the network data keys: list (ids, ages), rotate")
    commands = keys.add_subparsers(dest="keys_command", required=True)
    listing = commands.add_parser("list", help="key ids and ages (never a key)")
    out.json_flag(listing, '{"keys": [...]}')
    rotate = commands.add_parser("rotate", help="add a key on every node; new writes use it")
    out.json_flag(rotate, "the new key's id and age")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `keys` command."""
    if args.keys_command == "rotate":
        return asyncio.run(_rotate(args, settings))
    return _list(args, settings)


def _list(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.access.network_keys import NetworkKeys
    from bzzz.domain import utcnow
    from bzzz.network.sealing import keyring_of
    from bzzz.principal import LOCAL

    keys = NetworkKeys(keyring_of(settings, create=False), None).list(LOCAL)
    now = utcnow()
    shown = [k.to_json(now) for k in keys]
    if args.json:
        out.print_json({"keys": shown})
        return 0
    for key in shown:
        mark = "  (new writes)" if key["current"] else ""
        sys.stdout.write(f"{key['id']}  created {key['created_at']}  {_age(key)}{mark}\n")
    return 0


def _age(key: dict[str, Any]) -> str:
    seconds = float(key["age_seconds"])
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit} old"
    return f"{seconds:.0f}s old"


async def _rotate(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.domain import utcnow
    from bzzz.node.core import Node
    from bzzz.principal import LOCAL

    async with Node(settings, address="cli", tool=True) as node:
        key: KeyInfo = await node.keys.rotate(LOCAL, utcnow())
    if args.json:
        sys.stdout.write(json.dumps(key.to_json(utcnow())) + "\n")
    else:
        sys.stdout.write(f"network key {key.id} added; every node seals new content with it\n")
    return 0
