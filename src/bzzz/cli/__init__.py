"""The `bzzz` command: its parser, and the one place where errors become exit codes.

Each command group lives in a module of this package, which adds its part of the parser
(``add_parser``) and runs it:

    serve         serve                         tokens        token create|list|revoke
    init          init (your admin token, client configurations)
    events        subscriptions, webhooks       keys          keys list|rotate
    network       peers, identity, node         audit         audit list|verify|export
    threads       escalations, slurp            retention     retention, forget
    a2a           a2a add|list|remove
    metrics       metrics, costs                settings      config show
    replay        thread replay                 reservations  reservations list|check
    work          agents, threads, tasks, inbox
    knowledge     knowledge search|show|export
    status        status (where a node runs, its counts)
    guard         guard install|uninstall (git hooks holding agents to reservations)
    hooks         hooks claude-code, hooks run (Claude Code hooks; hook_events runs them)

``output`` prints (JSON, tables that never cut an id), ``start`` opens stores and starts
nodes, ``log`` stores one change on the network's log, ``serving`` is the file a running
`bzzz serve` keeps (where `config show` and `status` find it). The modules import what a command
needs inside the command: `bzzz --help` and `bzzz <command> --help` load no database, NATS,
model or web library, nor the settings.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bzzz import __version__
from bzzz.cli import a2a as cli_a2a
from bzzz.cli import audit as cli_audit
from bzzz.cli import events as cli_events
from bzzz.cli import guard as cli_guard
from bzzz.cli import hooks as cli_hooks
from bzzz.cli import init as cli_init
from bzzz.cli import keys as cli_keys
from bzzz.cli import knowledge as cli_knowledge
from bzzz.cli import metrics as cli_metrics
from bzzz.cli import network as cli_network
from bzzz.cli import replay as cli_replay
from bzzz.cli import reservations as cli_reservations
from bzzz.cli import retention as cli_retention
from bzzz.cli import serve as cli_serve
from bzzz.cli import settings as cli_settings
from bzzz.cli import snapshot as cli_snapshot
from bzzz.cli import status as cli_status
from bzzz.cli import threads as cli_threads
from bzzz.cli import tokens as cli_tokens
from bzzz.cli import work as cli_work
from bzzz.errors import BzzzError

if TYPE_CHECKING:
    from bzzz.config import Settings

EXIT_ERROR = 1
EXIT_CONFIG = 2

_COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "serve": cli_serve.run,
    "init": cli_init.run,
    "webhooks": cli_events.webhooks,
    "subscriptions": cli_events.subscriptions,
    "peers": cli_network.peers,
    "identity": cli_network.identity,
    "node": cli_network.node,
    "escalations": cli_threads.escalations,
    "slurp": cli_threads.slurp,
    "costs": cli_metrics.costs,
    "token": cli_tokens.run,
    "a2a": cli_a2a.run,
    "metrics": cli_metrics.run,
    "audit": cli_audit.run,
    "keys": cli_keys.run,
    "retention": cli_retention.run,
    "forget": cli_retention.forget,
    "config": cli_settings.show,
    "thread": cli_replay.run,
    "reservations": cli_reservations.run,
    "snapshot": cli_snapshot.run,
    "agents": cli_work.agents,
    "threads": cli_work.threads,
    "tasks": cli_work.tasks,
    "inbox": cli_work.inbox,
    "knowledge": cli_knowledge.run,
    "status": cli_status.run,
    "guard": cli_guard.run,
    "hooks": cli_hooks.run,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bzzz", description="BZZZ node: agents on a network")
    parser.add_argument("--version", action="version", version=f"bzzz {__version__}")
    parser.add_argument("--config", help="TOML settings file (or BZZZ_CONFIG)")
    parser.add_argument("--data-dir", help="data directory (or BZZZ_DATA_DIR)")
    sub = parser.add_subparsers(dest="command")
    cli_init.add_parser(sub)
    cli_serve.add_parser(sub)
    cli_status.add_parser(sub)
    cli_work.add_parser(sub)
    cli_knowledge.add_parser(sub)
    cli_events.add_parser(sub)
    cli_network.add_parser(sub)
    cli_threads.add_parser(sub)
    cli_tokens.add_parser(sub)
    cli_a2a.add_parser(sub)
    cli_metrics.add_parser(sub)
    cli_audit.add_parser(sub)
    cli_keys.add_parser(sub)
    cli_retention.add_parser(sub)
    cli_settings.add_parser(sub)
    cli_replay.add_parser(sub)
    cli_reservations.add_parser(sub)
    cli_snapshot.add_parser(sub)
    cli_guard.add_parser(sub)
    cli_hooks.add_parser(sub)
    return parser


# An Ed25519 public key in base64url (43 characters) may begin with "-"; argparse would take
# it for an option (`bzzz node admit -7vS…` answered "PUBLIC_KEY required").
_KEY_WITH_DASH = re.compile(r"-[A-Za-z0-9_-]{42}")


def _keys_stay_positional(argv: list[str]) -> list[str]:
    """Put ``--`` before the first public key that begins with a dash, unless one is there."""
    for index, arg in enumerate(argv):
        if arg == "--":
            return argv
        if _KEY_WITH_DASH.fullmatch(arg):
            return [*argv[:index], "--", *argv[index:]]
    return argv


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    node: dict[str, Any] = {}
    if args.data_dir:
        node["data_dir"] = args.data_dir
    if getattr(args, "port", None) is not None:
        node["http_port"] = args.port
    if getattr(args, "host", None):
        node["http_host"] = args.host
    return {"node": node} if node else {}


def _warn(warnings: list[str]) -> None:
    """Say on stderr, through logging, what the settings ignored (before any command logs).

    The records go to a handler of their own, in the CLI's ``bzzz: warning:`` form, whatever
    a command configures later (`bzzz serve`'s log file, JSON lines).
    """
    if not warnings:
        return
    import logging

    logger = logging.getLogger("bzzz.config")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("bzzz: warning: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    for warning in warnings:
        logger.warning("%s", warning)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bzzz` command."""
    parser = _parser()
    args = parser.parse_args(_keys_stay_positional(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        parser.print_help()
        return 0
    # Whatever the node or a command writes (store, keys, logs) is private to this user.
    os.umask(os.umask(0o077) | 0o077)
    try:
        # The settings (pydantic and what config imports) only once a command runs.
        from bzzz.config import load_settings, unknown_variables

        settings = load_settings(args.config, overrides=_overrides(args))
        _warn(unknown_variables())
        return cli_audit.recorded(_COMMANDS[args.command], args, settings)
    except BzzzError as exc:
        print(f"bzzz: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG if exc.code == "CONFIG_ERROR" else EXIT_ERROR
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
