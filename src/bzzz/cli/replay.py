"""`bzzz thread replay ID`: a thread's envelopes as the network's signed log holds them.

In log order: sequence, time, type, origin node, the key that signed it, and whether the
signature verifies (recomputed here: a tampered copy on the stream shows ``verified: false``,
it is not hidden). Posts that retention or erasure purged appear as the stand-ins the purging
node re-stated, saying what was removed. The command joins the log as a local process does
(the data directory's embedded server, or ``BZZZ_NATS_URL``), opens sealed content with the
data directory's network key, and reads as the local user (an admin of every project), as
the other read commands do; no node starts.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings
    from bzzz.conversations.replay import Entry


def add_parser(sub: Any) -> None:
    """The `thread` command group."""
    thread = sub.add_parser("thread", help="a thread as the signed log holds it")
    commands = thread.add_subparsers(dest="thread_command", required=True)
    replay = commands.add_parser(
        "replay", help="the thread's envelopes in log order, each signature verified"
    )
    replay.add_argument("thread_id", help="the thread's id (thread-…)")
    out.json_flag(replay, '{"thread_id": ..., "envelopes": [{seq, time, type, ...}]}')


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `thread` command."""
    entries = asyncio.run(_entries(args.thread_id, settings))
    shown = [entry.to_json() for entry in entries]
    if args.json:
        out.print_json({"thread_id": args.thread_id, "envelopes": shown})
        return 0
    columns = [
        out.Column("seq", justify="right"),
        out.Column("time", whole=True),
        out.Column("type", whole=True),
        out.Column("origin", whole=True),
        out.Column("signed by", whole=True),
        out.Column("verified"),
        out.Column("note"),
    ]
    cells = [
        [
            str(e["seq"]),
            e["time"] or "",
            e["type"] or "?",
            e["origin"] or "?",
            e["signed_by"] or "?",
            "yes" if e["verified"] else "NO",
            _note(e),
        ]
        for e in shown
    ]
    out.print_table(f"thread {args.thread_id}: {len(cells)} envelopes", columns, cells)
    return 0


def _note(entry: dict[str, Any]) -> str:
    stand_in = entry["stand_in"]
    if stand_in is not None:
        return (
            f"stand-in ({stand_in['reason']}): {stand_in['removed']}; "
            f"restated by {stand_in['restated_by']}"
        )
    return str(entry["problem"] or "")


async def _entries(thread_id: str, settings: Settings) -> list[Entry]:
    from pydantic import TypeAdapter, ValidationError

    from bzzz.conversations.replay import ThreadLog
    from bzzz.errors import InvalidParameters, ThreadNotFound
    from bzzz.network.identity import KEY_FILE, NodeIdentity
    from bzzz.network.join import joined_bus
    from bzzz.network.sealing import keyring_of
    from bzzz.node.network import trusted_origins
    from bzzz.principal import LOCAL
    from bzzz.schemas import MintedId

    try:
        TypeAdapter(MintedId).validate_python(thread_id)
    except ValidationError:
        raise InvalidParameters(f"'{thread_id[:80]}' is not a thread id") from None
    data_dir = start.require_node(settings, KEY_FILE)
    identity = NodeIdentity.load_or_create(data_dir)
    listed = trusted_origins(settings, identity)
    async with joined_bus(settings) as bus:
        log = ThreadLog(
            bus,
            settings.bzzz.network_id,
            trusted=None if settings.bzzz.admission else listed,
            keyring=keyring_of(settings, create=False),
        )
        entries = await log.entries(thread_id)
    created = next((e for e in entries if e.envelope and e.type == "thread.created"), None)
    metadata = created.envelope.payload.get("metadata") if created and created.envelope else None
    project = metadata.get("project") if isinstance(metadata, dict) else None
    # The local user reads every project's threads; the check is the one every reader passes.
    if created is None or not LOCAL.may_see_project(project):
        raise ThreadNotFound(
            f"no thread '{thread_id}' on the log", details={"thread_id": thread_id}
        )
    return entries
