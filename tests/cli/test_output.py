"""What the read commands print: whole ids in every table (narrow terminal or piped), and
one JSON object with its list under a named key."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
from pathlib import Path
from typing import Any

import pytest
from access.support import bzzz_cli, cli_env
from e2e.support import bzzz_executable

from bzzz.cli import metrics as cli_metrics
from bzzz.cli import output as cli_output
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope
from bzzz.schemas import SubscribeInput

pytestmark = pytest.mark.integration

NARROW = 60
WEBHOOK = "https://example.com/hooks/a-rather-long-path-that-does-not-fit-in-sixty-columns"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


async def _node_life(data_dir: Path) -> dict[str, Any]:
    """A node's life on ``data_dir``: a token and a webhook subscription (which outlives the
    node's stop, unlike a plain one); their ids."""
    settings = load_settings(environ={}, overrides={"node": {"data_dir": str(data_dir)}})
    async with Node(settings, bus=InMemoryBus()) as node:
        token, _ = await node.access.create_token(
            LOCAL, "team-a", ["shop"], ["*"], Scope.WRITE, None
        )
        hooked = await node.subscriptions.subscribe(
            Caller("owner"),
            SubscribeInput(event_types=["thread_created"], callback_webhook=WEBHOOK),
        )
        return {
            "node": node.node_id,
            "token": token.id,
            "subscriptions": [hooked["subscription_id"]],
        }


@pytest.fixture
async def lived(data_dir: Path, clean_env: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    ids = await _node_life(data_dir)
    return cli_env(clean_env, data_dir) | {"COLUMNS": str(NARROW)}, ids


def _in_terminal(env: dict[str, str], *args: str) -> str:
    """What `bzzz ARGS` shows on a terminal NARROW columns wide (a pty), colour codes removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, NARROW, 0, 0))
    proc = subprocess.Popen(
        [bzzz_executable(), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            assert ready, f"bzzz {' '.join(args)} wrote nothing for 60 s"
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        os.close(leader)
        if proc.stderr:
            proc.stderr.close()
    return _ANSI.sub("", b"".join(chunks).decode().replace("\r\n", "\n"))


def _piped(env: dict[str, str], *args: str) -> str:
    done = bzzz_cli(env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("show", [_in_terminal, _piped], ids=["terminal", "piped"])
async def test_subscriptions_list_shows_whole_ids_and_webhooks_at_sixty_columns(
    lived: tuple[dict[str, str], dict[str, Any]], show: Any
) -> None:
    env, ids = lived

    shown = show(env, "subscriptions", "list")

    for subscription_id in ids["subscriptions"]:
        assert subscription_id in shown
    assert WEBHOOK in shown
    assert ids["node"] in shown
    assert "active" in shown


@pytest.mark.parametrize("show", [_in_terminal, _piped], ids=["terminal", "piped"])
async def test_token_and_audit_lists_show_whole_ids_at_sixty_columns(
    lived: tuple[dict[str, str], dict[str, Any]], show: Any
) -> None:
    env, ids = lived
    unknown = "tok-01NOSUCHTOKEN0000000000000000"
    refused = bzzz_cli(env, "token", "revoke", unknown)  # refused, and recorded

    tokens = show(env, "token", "list")
    trail = show(env, "audit", "list")

    assert refused.returncode == 1 and f"no token '{unknown}'" in refused.stderr
    assert ids["token"] in tokens and "team-a" in tokens
    assert unknown in trail and "cli:token revoke" in trail and "INVALID_PARAMETERS" in trail


async def test_every_json_is_one_object_with_its_list_under_a_named_key(
    lived: tuple[dict[str, str], dict[str, Any]],
) -> None:
    env, ids = lived
    lists = {
        ("token", "list"): "tokens",
        ("subscriptions", "list"): "subscriptions",
        ("audit", "list"): "records",
        ("keys", "list"): "keys",
        ("webhooks",): "deliveries",
        ("escalations",): "escalations",
        ("slurp",): "events",
        ("retention", "status"): "runs",
        ("reservations", "list"): "reservations",
    }

    shown = {words: json.loads(_piped(env, *words, "--json")) for words in lists}

    for words, key in lists.items():
        assert isinstance(shown[words], dict), words
        assert isinstance(shown[words][key], list), words
    assert [t["id"] for t in shown[("token", "list")]["tokens"]] == [ids["token"]]
    listed = {s["subscription_id"] for s in shown[("subscriptions", "list")]["subscriptions"]}
    assert listed == set(ids["subscriptions"])
    assert {s["status"] for s in shown[("subscriptions", "list")]["subscriptions"]} == {"active"}
    metrics = json.loads(_piped(env, "metrics", "--json"))
    assert {"agent_availability", "network_latency"} <= set(metrics)
    costs = json.loads(_piped(env, "costs", "--json"))
    assert set(costs) == {"daily", "monthly"}


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_metrics_shows_whole_node_ids_of_measured_round_trips(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    from rich.console import Console

    first, second = "node-" + "a" * 40, "node-" + "b" * 40
    shown = cli_metrics.figures_json(_empty_figures())
    shown["network_latency"] = {
        "live": True,
        "pairs": [{"from": first, "to": second, "last_ms": 0.42}],
    }
    written = io.StringIO()
    # A terminal NARROW columns wide, or a pipe (the console the command would make for one).
    made = (
        Console(file=written, force_terminal=True, width=NARROW, color_system=None)
        if terminal
        else cli_output.console(written)
    )
    monkeypatch.setattr(cli_output, "console", lambda file=None: made)

    cli_metrics._table(shown)
    table = written.getvalue()

    for node_id in (first, second):  # each id whole, on one line
        assert any(node_id in line for line in table.splitlines()), table
    assert "0.42 ms" in table


def _empty_figures() -> Any:
    from bzzz.metrics.figures import Figures

    return Figures()
