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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bzzz import __version__, cli_audit, cli_keys, cli_metrics, cli_retention, cli_tokens
from bzzz import cli_output as out
from bzzz import cli_start as start
from bzzz.config import Settings, load_settings, unknown_variables
from bzzz.errors import BzzzError, ConfigError

logger = logging.getLogger("bzzz")

EXIT_ERROR = 1
EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bzzz", description="BZZZ node: agents on a network")
    parser.add_argument("--version", action="version", version=f"bzzz {__version__}")
    parser.add_argument("--config", help="TOML settings file (or BZZZ_CONFIG)")
    parser.add_argument("--data-dir", help="data directory (or BZZZ_DATA_DIR)")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the node (MCP over HTTP at /mcp, or --stdio)")
    serve.add_argument("--stdio", action="store_true", help="MCP over stdin/stdout")
    serve.add_argument("--port", type=int, help="HTTP port (or BZZZ_HTTP_PORT; default 7331)")
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    webhooks = sub.add_parser("webhooks", help="webhook deliveries (the dead letters too)")
    webhooks.add_argument(
        "--status", choices=["pending", "delivered", "dead"], help="only this status"
    )
    webhooks.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    webhooks_sub = webhooks.add_subparsers(dest="webhooks_command")
    redrive = webhooks_sub.add_parser("redrive", help="send dead-lettered deliveries again")
    redrive.add_argument("ids", nargs="*", type=int, help="delivery ids (see bzzz webhooks)")
    redrive.add_argument("--all", action="store_true", help="every dead-lettered delivery")
    subscriptions = sub.add_parser("subscriptions", help="the network's event subscriptions")
    subscriptions_sub = subscriptions.add_subparsers(dest="subscriptions_command", required=True)
    listing = subscriptions_sub.add_parser("list", help="list them (newest first)")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.add_argument("--limit", type=int, default=1000, help="newest N (default 1000)")
    deleting = subscriptions_sub.add_parser("delete", help="remove one from the network")
    deleting.add_argument("id", help="the subscription id")
    _json_flag(webhooks, '{"deliveries": [...]}')
    peers = sub.add_parser("peers", help="the nodes of the network and whether they are alive")
    _json_flag(peers, '{"network": ..., "peers": [NetworkPeer]}')
    identity = sub.add_parser(
        "identity", help="this node's id and public key (for BZZZ_TRUSTED_NODES)"
    )
    _json_flag(identity, '{"node_id": ..., "public_key": ...}')
    nodes = sub.add_parser("node", help="nodes admitted to the network (bzzz.admission)")
    nodes_sub = nodes.add_subparsers(dest="node_command", required=True)
    nodes_sub.add_parser("admit", help="admit a node (acts with this node's key)").add_argument(
        "node", metavar="PUBLIC_KEY", help="its public key (`bzzz identity` on that node)"
    )
    nodes_sub.add_parser("remove", help="take a node out of the network").add_argument(
        "node", metavar="PUBLIC_KEY|NODE_ID"
    )
    nodes_sub.add_parser("list", help="the admitted nodes, as the log has them").add_argument(
        "--json", action="store_true", help="print them as JSON"
    )
    escalations = sub.add_parser("escalations", help="thread escalations and their actions")
    escalations.add_argument("--open", action="store_true", help="only unresolved ones")
    escalations.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    _json_flag(escalations, '{"escalations": [EscalationEvent]}')
    slurp = sub.add_parser("slurp", help="SLURP context events from consensus")
    slurp.add_argument(
        "--status", choices=["pending", "submitted", "failed", "stored"], help="only this status"
    )
    slurp.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    _json_flag(slurp, '{"node_id": ..., "events": [...]}')
    costs = sub.add_parser("costs", help="model spending today and this month, per model")
    costs.add_argument("--node", help="only this node's calls (a node id)")
    _json_flag(costs, '{"daily": CostUsage, "monthly": CostUsage}')
    cli_tokens.add_parser(sub)
    cli_metrics.add_parser(sub)
    cli_audit.add_parser(sub)
    cli_keys.add_parser(sub)
    cli_retention.add_parser(sub)
    config = sub.add_parser("config", help="settings")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser("show", help="print the effective settings, secrets masked")
    _json_flag(show, "the settings (always JSON; --json also on a terminal: no colour)")
    return parser


def _json_flag(parser: argparse.ArgumentParser, shape: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print JSON: {shape}")


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
    # stdout belongs to the MCP stdio transport: logs go to stderr or the (rotating) file.
    from bzzz.metrics.logs import configure

    configure(settings.logging)


async def _serve_stdio(settings: Settings) -> None:
    from mcp.server.stdio import stdio_server

    from bzzz.mcp import stdio
    from bzzz.mcp.server import build_server
    from bzzz.node import Node

    # stdout is claimed first: nothing the node starts (nats-server included) inherits it.
    with stdio.claimed_stdout() as wire:
        async with start.started(Node(settings, address="stdio")) as node:
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
    import uvicorn

    class _QuietServer(uvicorn.Server):
        # uvicorn re-raises the signal it caught after its own shutdown, which would kill us
        # before the node stops; the CLI owns SIGINT/SIGTERM instead.
        def capture_signals(self) -> contextlib.nullcontext[None]:  # type: ignore[override]
            return contextlib.nullcontext()

    from bzzz.api.app import build_app
    from bzzz.api.protocol import with_header_timeout
    from bzzz.mcp.server import build_server
    from bzzz.metrics.logs import RequestIds
    from bzzz.node import Node

    host = settings.node.http_host
    _check_exposure(settings)
    listener = start.listen(host, settings.node.http_port)
    # The real port (port 0 picks one), so peers see it in this node's address.
    port = listener.getsockname()[1]
    address = f"http://{host}:{port}/mcp"
    limits = settings.limits
    try:
        async with start.started(Node(settings, address=address)) as node:
            server, _ = build_server(node)
            app = build_app(node, server, host, address.removesuffix("/mcp"))
            config = uvicorn.Config(
                RequestIds(app),
                host=host,
                port=port,
                log_level="warning",
                timeout_graceful_shutdown=3,
                lifespan="on",
                # One client's idle sockets cannot hold every connection: past the limit
                # uvicorn answers 503 at once, and idle keep-alive connections close.
                limit_concurrency=limits.http_connections,
                timeout_keep_alive=max(1, int(limits.http_keepalive_seconds)),
                # A socket that never sends a request head is closed after the header timeout.
                http=with_header_timeout(limits.http_header_timeout),
            )
            web = _QuietServer(config)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, setattr, web, "should_exit", True)
            logger.info("MCP at %s", address)
            await web.serve(sockets=[listener])
    finally:
        listener.close()


def _check_exposure(settings: Settings) -> None:
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


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    _setup_logging(settings)
    # A served node spends much of each call in the event loop and its sockets (HTTP, NATS):
    # uvloop roughly halves that (measured in BENCHMARKS.md).
    with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
        if args.stdio:
            runner.run(_run_until_signal(_serve_stdio(settings)))
        else:
            runner.run(_serve_http(settings))
    return 0


def _require_node(settings: Settings, needs: str = "bzzz.db") -> Path:
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


async def _deliveries(settings: Settings, status: str | None, limit: int) -> list[Any]:
    from bzzz.store.repository import Repository

    async def query(repo: Repository) -> list[Any]:
        return await repo.deliveries(status, limit)

    return await _read(settings, query)


def delivery_json(d: Any) -> dict[str, Any]:
    """A webhook delivery as `bzzz webhooks --json` prints it."""
    from bzzz.domain import iso

    return {
        "id": d.id,
        "subscription_id": d.subscription_id,
        "event_id": d.event_id,
        "url": d.url,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": iso(d.next_attempt_at) if d.status == "pending" else None,
        "last_error": d.last_error,
        "created_at": iso(d.created_at),
        "finished_at": iso(d.finished_at),
    }


def _webhooks(args: argparse.Namespace, settings: Settings) -> int:
    rows = [delivery_json(d) for d in asyncio.run(_deliveries(settings, args.status, args.limit))]
    if args.json:
        out.print_json({"deliveries": rows})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("status"),
        out.Column("attempts", justify="right"),
        out.Column("url", whole=True),
        out.Column("event", whole=True),
        out.Column("next attempt", whole=True),
        out.Column("last error"),
    ]
    cells = [
        [
            str(d["id"]),
            d["status"],
            str(d["attempts"]),
            d["url"],
            d["event_id"],
            d["next_attempt_at"] or "",
            d["last_error"] or "",
        ]
        for d in rows
    ]
    out.print_table(f"webhook deliveries ({args.status or 'all'})", columns, cells)
    return 0


def _redrive(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.events.admin import redrive_deliveries

    if bool(args.ids) == bool(args.all):
        print("bzzz: name delivery ids or --all (not both)", file=sys.stderr)
        return EXIT_ERROR
    ids = asyncio.run(redrive_deliveries(settings, None if args.all else list(args.ids)))
    shown = ", ".join(map(str, ids[:20])) + (" …" if len(ids) > 20 else "")
    sys.stdout.write(f"queued {len(ids)} dead-lettered deliveries again{': ' if ids else ''}")
    sys.stdout.write(f"{shown}\n")
    return 0


def _subscriptions(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.events import admin

    if args.subscriptions_command == "delete":
        seq = asyncio.run(admin.delete_subscription(settings, args.id))
        sys.stdout.write(f"removed {args.id} (log sequence {seq}; every node applies it)\n")
        return 0
    subs = asyncio.run(admin.list_subscriptions(settings, args.limit))
    if args.json:
        shown = [admin.subscription_json(s) for s in subs]
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="subscriptions")
    for column in ("id", "subscriber", "event types", "filter", "webhook", "node", "created"):
        table.add_column(column)
    for s in subs:
        shown_row = admin.subscription_json(s)
        table.add_row(
            s.id,
            s.subscriber_id,
            ", ".join(s.event_types),
            s.filter_address or "",
            s.callback_webhook or "",
            s.node_id,
            shown_row["created_at"],
        )
    Console(width=200 if not sys.stdout.isatty() else None).print(table)
    return 0


async def _board(settings: Settings) -> list[Any]:
    from bzzz.peers.board import read_board

    return await read_board(settings)


def _peers(args: argparse.Namespace, settings: Settings) -> int:
    peers = [peer.to_json() for peer in asyncio.run(_board(settings))]
    if args.json:
        out.print_json({"network": settings.bzzz.network_id, "peers": peers})
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
        for p in peers
    ]
    out.print_table(f"peers of network {settings.bzzz.network_id}", columns, cells)
    return 0


def _node(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz import node_admin

    if args.node_command == "list":
        listed = asyncio.run(node_admin.admitted(settings))
        if args.json:
            sys.stdout.write(json.dumps(listed, indent=2) + "\n")
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


def _identity(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.network.identity import KEY_FILE, NodeIdentity

    # Reads only: a mistyped data directory must not get a new key.
    data_dir = _require_node(settings, KEY_FILE)
    identity = NodeIdentity.load_or_create(data_dir)
    if args.json:
        out.print_json({"node_id": identity.node_id, "public_key": identity.public_key_b64})
        return 0
    sys.stdout.write(f"node_id    {identity.node_id}\npublic_key {identity.public_key_b64}\n")
    return 0


async def _read(settings: Settings, query: Any) -> list[Any]:
    from bzzz.network.sealing import keyring_of
    from bzzz.store.database import Database
    from bzzz.store.repository import Repository

    _require_node(settings)
    db = Database(settings.database_url(), keyring_of(settings, create=False))
    try:
        with out.progress("opening the store (migrations)"):
            await db.open()
        async with db.session() as session:
            result: list[Any] = await query(Repository(session))
            return result
    finally:
        await db.close()


def _action_cell(action: dict[str, Any]) -> str:
    cell = f"{action.get('type')}: {action.get('status')}"
    if action.get("attempts"):
        cell += f" ({action['attempts']}x)"
    if action.get("status") == "failed":
        cell += f" {action.get('code')} {action.get('error')}"
    return cell


def _escalations(args: argparse.Namespace, settings: Settings) -> int:
    rows = asyncio.run(
        _read(settings, lambda repo: repo.escalations(open_only=args.open, limit=args.limit))
    )
    if args.json:
        out.print_json({"escalations": [e.to_json() for e in rows]})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("thread", whole=True),
        out.Column("rule"),
        out.Column("triggered", whole=True),
        out.Column("reason"),
        out.Column("actions"),
        out.Column("resolved"),
    ]
    cells = [
        [
            e.to_json()["id"],
            e.thread_id,
            e.rule,
            e.to_json()["triggeredAt"] or "",
            e.reason,
            "\n".join(_action_cell(a) for a in e.actions),
            (e.resolution or "yes") if e.resolved else "no",
        ]
        for e in rows
    ]
    out.print_table(f"escalations ({'open' if args.open else 'all'})", columns, cells)
    return 0


def slurp_json(ev: Any, node_id: str) -> dict[str, Any]:
    """A SLURP context event as `bzzz slurp --json` prints it."""
    from bzzz.domain import iso

    return {
        "id": ev.id,
        "thread_id": ev.thread_id,
        "status": ev.status,
        "attempts": ev.attempts,
        "created_at": iso(ev.created_at),
        "submitted_at": iso(ev.submitted_at),
        "origin": ev.origin,
        "this_node": ev.origin == node_id,
        "topic": str(ev.event.get("context", {}).get("topic", "")),
        "last_error": ev.last_error,
        "event": ev.event,
    }


def _slurp(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.network.identity import KEY_FILE, NodeIdentity

    # The submission state is this node's: "remote" events are another node's to submit.
    data_dir = _require_node(settings, KEY_FILE)
    node_id = NodeIdentity.load_or_create(data_dir).node_id
    rows = asyncio.run(
        _read(settings, lambda repo: repo.slurp_events(node_id, args.status, args.limit))
    )
    events = [slurp_json(ev, node_id) for ev in rows]
    if args.json:
        out.print_json({"node_id": node_id, "events": events})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("thread", whole=True),
        out.Column("status"),
        out.Column("attempts", justify="right"),
        out.Column("created", whole=True),
        out.Column("submitted by", whole=True),
        out.Column("topic"),
        out.Column("last error"),
    ]
    cells = [
        [
            ev["id"],
            ev["thread_id"],
            ev["status"],
            str(ev["attempts"]),
            ev["created_at"] or "",
            "this node" if ev["this_node"] else ev["origin"],
            ev["topic"],
            ev["last_error"] or "",
        ]
        for ev in events
    ]
    title = f"SLURP context events of node {node_id} ({args.status or 'all'})"
    out.print_table(title, columns, cells)
    return 0


async def _usage(settings: Settings, node_id: str | None) -> list[dict[str, Any]]:
    from bzzz.domain import utcnow
    from bzzz.llm.costs import cost_usage, periods
    from bzzz.network.sealing import keyring_of
    from bzzz.store.database import Database
    from bzzz.store.llm_repository import LLMRepository

    _require_node(settings)
    day, month = periods(utcnow())
    db = Database(settings.database_url(), keyring_of(settings, create=False))
    try:
        with out.progress("opening the store (migrations)"):
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
    daily, monthly = asyncio.run(_usage(settings, args.node))
    if args.json:
        out.print_json({"daily": daily, "monthly": monthly})
        return 0
    scope = f"node {args.node}" if args.node else "all nodes"
    columns = [
        out.Column("period", whole=True),
        out.Column("model", whole=True),
        *(
            out.Column(name, justify="right")
            for name in ("calls", "tokens", "cost (USD)", "limit (USD)")
        ),
    ]
    limits = {
        daily["date"]: settings.cost.daily_limit,
        monthly["date"]: settings.cost.monthly_limit,
    }
    cells = []
    for usage in (daily, monthly):
        for model, spend in usage["models"].items():
            row = [str(spend["calls"]), str(spend["tokens"]), f"{spend['cost']:.6f}", ""]
            cells.append([usage["date"], model, *row])
        limit = limits[usage["date"]]
        cells.append(
            [
                usage["date"],
                "total",
                str(usage["apiCalls"]),
                str(usage["tokens"]["total"]),
                f"{usage['totalCost']:.6f}",
                f"{limit:.2f}" if limit else "none",
            ]
        )
    out.print_table(f"model spending ({scope})", columns, cells)
    return 0


def _config_show(args: argparse.Namespace, settings: Settings) -> int:
    from rich.syntax import Syntax

    text = json.dumps(settings.masked(), indent=2, default=str)
    if args.json or not sys.stdout.isatty():
        # Piped: plain JSON, never cropped to a console width.
        sys.stdout.write(text + "\n")
        return 0
    out.console().print(Syntax(text, "json", word_wrap=True))
    return 0


def _webhooks_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.webhooks_command == "redrive":
        return _redrive(args, settings)
    return _webhooks(args, settings)


_COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "serve": _serve,
    "webhooks": _webhooks_command,
    "subscriptions": _subscriptions,
    "costs": _costs,
    "peers": _peers,
    "identity": _identity,
    "node": _node,
    "escalations": _escalations,
    "slurp": _slurp,
    "token": cli_tokens.run,
    "metrics": cli_metrics.run,
    "audit": cli_audit.run,
    "keys": cli_keys.run,
    "retention": cli_retention.run,
    "forget": cli_retention.forget,
    "config": _config_show,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bzzz` command."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    # Whatever the node or a command writes (store, keys, logs) is private to this user.
    os.umask(os.umask(0o077) | 0o077)
    try:
        settings = load_settings(args.config, overrides=_overrides(args))
        for warning in unknown_variables():
            print(f"bzzz: warning: {warning}", file=sys.stderr)
        return cli_audit.recorded(_COMMANDS[args.command], args, settings)
    except BzzzError as exc:
        print(f"bzzz: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG if exc.code == "CONFIG_ERROR" else EXIT_ERROR
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
