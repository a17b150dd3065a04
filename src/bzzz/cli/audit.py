"""`bzzz audit list|verify|export`, and the record of every CLI change.

The commands read the data directory's database directly: no node needs to run. ``recorded``
wraps each command ``main`` runs; the changes among them (token create and revoke, node admit
and remove, subscriptions delete, webhooks redrive, retention run, forget) are appended to the
data directory's chain as the local user, allowed or refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.errors import BzzzError, InvalidParameters

if TYPE_CHECKING:
    from bzzz.audit.records import Record
    from bzzz.audit.verify import Report
    from bzzz.config import Settings
    from bzzz.store.database import Database

logger = logging.getLogger(__name__)

EXIT_BROKEN = 3

# The CLI commands that change the network or the node: (command, its sub-command attribute).
_CHANGES = {
    "token": "token_command",
    "a2a": "a2a_command",
    "node": "node_command",
    "subscriptions": "subscriptions_command",
    "webhooks": "webhooks_command",
    "keys": "keys_command",
    "retention": "retention_command",
    "escalations": "escalations_command",
    # A command without sub-commands: the action is its name.
    "forget": "",
    "snapshot": "",
}
_CHANGE_ACTIONS = frozenset(
    {
        "token create",
        "a2a add",
        "a2a remove",
        "token revoke",
        "node admit",
        "node remove",
        "subscriptions delete",
        "webhooks redrive",
        "keys rotate",
        "retention run",
        "escalations ack",
        "escalations resolve",
        "forget",
        "snapshot",
    }
)
# The CLI reads that show protected content (messages, task data, thread topics): on the
# trail as the MCP tools' reads are (who read, whose, allowed or refused).
_CONTENT_READS = frozenset({"inbox", "threads", "tasks", "knowledge"})
_TARGETS = ("id", "node", "name", "agent", "agent_id", "url", "fact_id", "project")


def add_parser(sub: Any) -> None:
    """The `audit` command group."""
    audit = sub.add_parser("audit", help="the audit trail: list, verify, export")
    commands = audit.add_subparsers(dest="audit_command", required=True)
    listing = commands.add_parser("list", help="recorded actions, oldest first")
    listing.add_argument("--principal", help="only this principal's actions (its id)")
    listing.add_argument("--agent", help="only this agent's actions")
    listing.add_argument("--since", help="an ISO time, or an age such as 12h or 7d")
    listing.add_argument("--limit", type=int, help="at most this many (the newest)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    check = commands.add_parser("verify", help="check the chain and the signed heads")
    check.add_argument("--export", type=Path, help="verify this export (JSON lines) instead")
    check.add_argument("--json", action="store_true", help="print JSON")
    export = commands.add_parser("export", help="write every record as JSON lines")
    export.add_argument("--output", "-o", type=Path, help="write here instead of stdout")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `audit` command."""
    commands: dict[str, Callable[[argparse.Namespace, Settings], Any]] = {
        "list": _list,
        "verify": _verify,
        "export": _export,
    }
    result: int = asyncio.run(commands[args.audit_command](args, settings))
    return result


def _since(text: str | None) -> str | None:
    from bzzz.access.tokens import parse_duration
    from bzzz.audit.records import stamp

    if text is None:
        return None
    try:
        return stamp(datetime.now(UTC) - parse_duration(text))
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidParameters(
            f"--since {text!r} is neither an ISO time nor an age such as 12h"
        ) from None
    return stamp(when if when.tzinfo else when.replace(tzinfo=UTC))


async def _open(settings: Settings) -> Database:
    from bzzz.network.sealing import keyring_of
    from bzzz.store.database import Database

    db = Database(settings.database_url(), keyring_of(settings, create=False))
    await db.open()
    return db


async def _list(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.audit import reading

    wanted = reading.Filter(
        principal=args.principal,
        agent=args.agent,
        since=_since(args.since),
        limit=args.limit,
        newest_first=bool(args.limit),
    )
    db = await _open(settings)
    try:
        found = await reading.records(db, wanted)
    finally:
        await db.close()
    if args.limit:
        found.reverse()
    if args.json:
        out.print_json({"records": [r.to_json() for r in found]})
        return 0
    _table(found)
    return 0


def _table(found: list[Record]) -> None:
    columns = [
        out.Column("seq", justify="right"),
        out.Column("time", whole=True),
        out.Column("principal", whole=True),
        out.Column("agent", whole=True),
        out.Column("session"),
        out.Column("action"),
        out.Column("target", whole=True),
        out.Column("outcome"),
    ]
    cells = [
        [
            str(r.seq),
            r.at,
            r.principal,
            r.agent or "",
            r.session,
            r.action,
            r.target or "",
            r.outcome,
        ]
        for r in found
    ]
    out.print_table("audit trail", columns, cells)


def _local_node(settings: Settings) -> str | None:
    from bzzz.network.identity import KEY_FILE, NodeIdentity

    data_dir = settings.node.data_dir.expanduser()
    if not (data_dir / KEY_FILE).exists():
        return None
    return NodeIdentity.load_or_create(data_dir).node_id


def _read_export(path: Path) -> list[Record]:
    from bzzz.audit.records import Record

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [Record.from_json(json.loads(line)) for line in lines if line.strip()]
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidParameters(f"cannot read the export {path}: {exc}") from None


async def _log_heads(settings: Settings) -> list[Any] | None:
    """The signed heads on the network's log; None (said on stderr) when it cannot be read."""
    from bzzz.audit.trail import HEAD_KIND
    from bzzz.audit.verify import heads_on_log
    from bzzz.network.join import joined_bus

    try:
        async with joined_bus(settings) as bus:
            messages = await bus.read_kind(HEAD_KIND)
    except BzzzError as exc:
        sys.stderr.write(f"bzzz: cannot read the signed heads on the log ({exc}); ")
        sys.stderr.write("checking against this store's copy only\n")
        return None
    return heads_on_log((m.data for m in messages), settings.bzzz.network_id)


async def _verify(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.audit import reading
    from bzzz.audit.verify import merged_heads

    db = await _open(settings)
    try:
        records = _read_export(args.export) if args.export else await reading.records(db)
        stored = await reading.heads(db)
        anchors = await reading.anchors(db)
        local = None if args.export else _local_node(settings)
    finally:
        await db.close()
    # The log's signed heads too: a rewritten chain whose local heads were deleted is caught.
    on_log = await _log_heads(settings)
    heads = merged_heads(stored, on_log or [])
    chains: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        chains[record.node_id].append(record)
    if local is not None:
        chains.setdefault(local, [])
    reports: dict[str, Report] = {}
    # A bar on a terminal (nothing when piped): a long trail takes a while to hash again.
    with out.progress("verifying the audit trail", total=len(records)) as update:
        for node in sorted(chains):
            reports[node] = _verify_node(node, chains[node], heads, anchors.get(node))
            update(sum(len(chains[n]) for n in reports))
    others = [h for h in heads if h.node_id not in chains]
    if others:
        from bzzz.audit.verify import verify

        reports["other nodes' heads"] = verify([], others, "")
    return _show(reports, args.json)


def _verify_node(node: str, records: list[Record], heads: list[Any], anchor: Any = None) -> Report:
    from bzzz.audit.verify import verify

    records.sort(key=lambda r: r.seq)
    return verify(records, [h for h in heads if h.node_id == node], node, anchor)


def _show(reports: dict[str, Report], as_json: bool) -> int:
    ok = all(r.ok for r in reports.values())
    if as_json:
        shown = {
            node: {
                "records": r.records,
                "heads": r.heads,
                "problems": [p.to_json() for p in r.problems],
            }
            for node, r in reports.items()
        }
        sys.stdout.write(json.dumps({"intact": ok, "nodes": shown}) + "\n")
        return 0 if ok else EXIT_BROKEN
    for node, report in reports.items():
        state = "intact" if report.ok else "BROKEN"
        sys.stdout.write(
            f"{node}: {report.records} records, {report.heads} signed heads: {state}\n"
        )
        for problem in report.problems:
            sys.stdout.write(f"  {problem.kind}: {problem.message}\n")
    return 0 if ok else EXIT_BROKEN


async def _export(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.audit import reading

    db = await _open(settings)
    try:
        found = await reading.records(db)
    finally:
        await db.close()
    if args.output is None:
        _write_lines(sys.stdout, found)
        return 0
    with args.output.open("w", encoding="utf-8") as out:
        _write_lines(out, found)
    sys.stderr.write(f"wrote {len(found)} records to {args.output}\n")
    return 0


def _write_lines(out: IO[str], found: list[Record]) -> None:
    for record in found:
        out.write(json.dumps(record.to_json(), sort_keys=True) + "\n")


def _change_of(args: argparse.Namespace) -> str | None:
    if getattr(args, "command", None) in _CONTENT_READS:
        from bzzz.cli import remote

        # Through a node, the node's own trail records the call (bzzz.api.audit).
        through_node = args.command == "inbox" and remote.chosen(args)
        return None if through_node else str(args.command)
    attribute = _CHANGES.get(str(getattr(args, "command", "")))
    if attribute is None:
        return None
    action = f"{args.command} {getattr(args, attribute, '')}" if attribute else args.command
    return action if action in _CHANGE_ACTIONS else None


def recorded(
    command: Callable[[argparse.Namespace, Settings], int],
    args: argparse.Namespace,
    settings: Settings,
) -> int:
    """Run a CLI command; a change (or a read of content) is recorded on the data directory's
    chain, allowed or not."""
    action = _change_of(args)
    if action is None:
        return command(args, settings)
    outcome = "INTERRUPTED"
    try:
        code = command(args, settings)
        outcome = "ok" if code == 0 else f"EXIT_{code}"
        return code
    except BzzzError as exc:
        outcome = exc.code
        raise
    finally:
        params = {k: v for k, v in vars(args).items() if k not in ("config", "func")}
        target = next((str(params[k]) for k in _TARGETS if params.get(k)), None)
        try:
            asyncio.run(record_cli(settings, action, target, params, outcome))
        except BzzzError:
            logger.error("the CLI change %s could not be recorded on the audit trail", action)


async def record_cli(
    settings: Settings, action: str, target: str | None, params: dict[str, Any], outcome: str
) -> None:
    """Append one CLI change to the data directory's chain (as the local user)."""
    from bzzz.audit.records import Action, digest, stamp
    from bzzz.audit.trail import append
    from bzzz.network.identity import NodeIdentity
    from bzzz.principal import LOCAL

    identity = NodeIdentity.load_or_create(settings.node.data_dir.expanduser())
    entry = Action(
        at=stamp(datetime.now(UTC)),
        principal=LOCAL.id,
        session="cli",
        action=f"cli:{action}",
        outcome=outcome,
        digest=digest(params),
        target=target[:512] if target else None,
    )
    db = await _open(settings)
    try:
        await db.write(lambda s: append(s, identity.node_id, [entry]))
    finally:
        await db.close()
