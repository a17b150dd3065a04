"""`bzzz --help` and `bzzz <command> --help` answer without loading the heavy libraries."""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e.support import bzzz_executable

# Libraries a help text must not load: database, NATS, models, web, MCP, and the settings.
HEAVY = (
    "sqlalchemy",
    "alembic",
    "aiosqlite",
    "asyncpg",
    "nats",
    "openai",
    "starlette",
    "uvicorn",
    "mcp",
    "httpx",
    "pydantic",
    "cryptography",
    "bzzz.config",
    "bzzz.node",
    "bzzz.store",
    "a2a",
    "google.protobuf",
)

COMMANDS = [
    "init",
    "serve",
    "webhooks",
    "subscriptions",
    "peers",
    "identity",
    "node",
    "escalations",
    "slurp",
    "costs",
    "token",
    "a2a",
    "metrics",
    "audit",
    "keys",
    "retention",
    "forget",
    "config",
    "thread",
    "reservations",
    "snapshot",
    "agents",
    "threads",
    "tasks",
    "inbox",
    "knowledge",
    "status",
    "guard",
    "hooks",
]


def _imported(*args: str) -> tuple[str, set[str]]:
    """The help text of `bzzz ARGS` and every module it imported (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", bzzz_executable(real=True), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done.stdout, modules


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_bzzz_help_lists_every_command_and_loads_no_heavy_library() -> None:
    text, modules = _imported("--help")

    listed = next(w for w in text.split() if w.startswith("{") and w.endswith("}"))
    assert sorted(listed.strip("{}").split(",")) == sorted(COMMANDS)
    assert "bzzz.cli" in modules  # the check sees the command's own imports
    assert _heavy(modules) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_help_loads_no_heavy_library(command: str) -> None:
    text, modules = _imported(command, "--help")

    assert text.startswith(f"usage: bzzz {command}")
    assert _heavy(modules) == []


@pytest.mark.parametrize(
    "words",
    [
        ["token", "create"],
        ["audit", "verify"],
        ["subscriptions", "list"],
        ["node", "admit"],
        ["thread", "replay"],
        ["a2a", "add"],
    ],
)
def test_a_sub_command_help_loads_no_heavy_library(words: list[str]) -> None:
    text, modules = _imported(*words, "--help")

    assert text.startswith(f"usage: bzzz {' '.join(words)}")
    assert _heavy(modules) == []
