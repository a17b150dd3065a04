"""`bzzz config show`: the effective settings (file, environment, options), secrets masked.

Beside them, two things a person looking at the settings needs: the ``BZZZ_*`` variables
that set nothing (``unknown_settings``, each with the nearest known setting), and what the
nodes running on the data directory run with (``running``: read from each one's serving file,
cli/serving.py, which ``source`` names), with the settings that differ from this shell's.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import serving as serving

if TYPE_CHECKING:
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `config` command group."""
    config = sub.add_parser("config", help="settings")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser(
        "show",
        help="print the effective settings, secrets masked, and what a running node runs with",
    )
    out.json_flag(show, "the settings (always JSON; --json also on a terminal: no colour)")


def running_nodes(settings: Settings) -> list[dict[str, Any]]:
    """The nodes serving from the data directory, each with what differs from ``settings``."""
    found = serving.running(settings.node.data_dir.expanduser())
    for facts in found:
        differs: dict[str, dict[str, Any]] = {}
        if "port" in facts and facts["port"] != settings.node.http_port:
            differs["node.http_port"] = {
                "configured": settings.node.http_port,
                "running": facts["port"],
            }
        if "host" in facts and facts["host"] != settings.node.http_host:
            differs["node.http_host"] = {
                "configured": settings.node.http_host,
                "running": facts["host"],
            }
        if facts.get("network") not in (None, settings.bzzz.network_id):
            differs["bzzz.network_id"] = {
                "configured": settings.bzzz.network_id,
                "running": facts["network"],
            }
        facts["differs"] = differs
    return found


def show(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz config show`."""
    from bzzz.config import unknown_variables

    shown = settings.masked()
    shown["unknown_settings"] = unknown_variables()
    shown["running"] = running_nodes(settings)
    text = json.dumps(shown, indent=2, default=str)
    if args.json or not sys.stdout.isatty():
        # Piped: plain JSON, never cropped to a console width.
        sys.stdout.write(text + "\n")
        return 0
    from rich.syntax import Syntax

    out.console().print(Syntax(text, "json", word_wrap=True))
    for facts in shown["running"]:
        _say_running(facts)
    return 0


def _say_running(facts: dict[str, Any]) -> None:
    where = facts.get("mcp_url") or f"MCP over {facts.get('transport', 'stdio')}"
    line = f"running: slot {facts.get('slot')} (pid {facts['pid']}) serves {where}"
    if facts.get("dashboard_url"):
        line += f", dashboard {facts['dashboard_url']}"
    console = out.console()
    console.print(f"{line} (from {facts['source']})", markup=False, highlight=False)
    for name, values in facts["differs"].items():
        console.print(
            f"  {name}: the running node has {values['running']}, "
            f"these settings {values['configured']}",
            markup=False,
            highlight=False,
        )
