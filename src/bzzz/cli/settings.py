"""`bzzz config show`: the effective settings (file, environment, options), secrets masked."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out

if TYPE_CHECKING:
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `config` command group."""
    config = sub.add_parser("config", help="settings")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser("show", help="print the effective settings, secrets masked")
    out.json_flag(show, "the settings (always JSON; --json also on a terminal: no colour)")


def show(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz config show`."""
    text = json.dumps(settings.masked(), indent=2, default=str)
    if args.json or not sys.stdout.isatty():
        # Piped: plain JSON, never cropped to a console width.
        sys.stdout.write(text + "\n")
        return 0
    from rich.syntax import Syntax

    out.console().print(Syntax(text, "json", word_wrap=True))
    return 0
