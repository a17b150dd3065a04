"""`bzzz peers`, `bzzz identity` and `bzzz node admit|remove|list`: the nodes of the network.

``identity`` reads the data directory's key; ``peers`` reads the network's peer board;
``node`` joins the network's log as a local process does and acts with the data directory's
key (``node/admin.py``). None of them starts a node.
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
    """The `peers`, `identity` and `node` commands."""
    peers = sub.add_parser("peers", help="the nodes of the network and whether they are alive")
    out.json_flag(peers, '{"network": ..., "peers": [NetworkPeer]}')
    identity = sub.add_parser(
        "identity", help="this node's id and public key (for BZZZ_TRUSTED_NODES)"
    )
    out.json_flag(identity, '{"node_id": ..., "public_key": ...}')
    nodes = sub.add_parser("node", help="nodes admitted to the network (bzzz.admission)")
    nodes_sub = nodes.add_subparsers(dest="node_command", required=True)
    nodes_sub.add_parser("admit", help="admit a node (acts with this node's key)").add_argument(
        "node", metavar="PUBLIC_KEY", help="its public key (`bzzz identity` on that node)"
    )
    nodes_sub.add_parser("remove", help="take a node out of the network").add_argument(
        "node", metavar="PUBLIC_KEY|NODE_ID"
    )
    listing = nodes_sub.add_parser("list", help="the admitted nodes, as the log has them")
    out.json_flag(listing, '{"enforced": ..., "open": ..., "nodes": [{node_id, public_key}]}')


def peers(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz peers`."""
    from bzzz.peers.board import read_board

    shown = [peer.to_json() for peer in asyncio.run(read_board(settings))]
    if args.json:
        out.print_json({"network": settings.bzzz.network_id, "peers": shown})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("status"),
        out.Column("address", whole=True),
        out.Column("capabilities"),
        out.Column("last seen", whole=True),
    ]
    cells = [
        [p["id"], p["status"], p["address"], ", ".join(p["capabilities"]), p["lastSeen"]]
        for p in shown
    ]
    out.print_table(f"peers of network {settings.bzzz.network_id}", columns, cells)
    return 0


def identity(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz identity`."""
    from bzzz.network.identity import KEY_FILE, NodeIdentity

    # Reads only: a mistyped data directory must not get a new key.
    data_dir = start.require_node(settings, KEY_FILE)
    me = NodeIdentity.load_or_create(data_dir)
    if args.json:
        out.print_json({"node_id": me.node_id, "public_key": me.public_key_b64})
        return 0
    sys.stdout.write(f"node_id    {me.node_id}\npublic_key {me.public_key_b64}\n")
    return 0


def node(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz node admit|remove|list`."""
    from bzzz.node import admin as node_admin

    if args.node_command == "list":
        listed = asyncio.run(node_admin.admitted(settings))
        if args.json:
            out.print_json(listed)
            return 0
        state = "open (no node admitted yet)" if listed["open"] else "closed"
        sys.stdout.write(f"network {settings.bzzz.network_id}: {state}\n")
        for entry in listed["nodes"]:
            sys.stdout.write(f"{entry['node_id']}  {entry['public_key']}\n")
        return 0
    act = node_admin.admit if args.node_command == "admit" else node_admin.remove
    outcome = asyncio.run(act(settings, args.node))
    verb = "admitted" if args.node_command == "admit" else "removed"
    sys.stdout.write(f"{verb} {outcome['node_id']}\n")
    return 0
