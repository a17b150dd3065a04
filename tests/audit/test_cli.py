"""`bzzz audit list|verify|export` on a node's data directory, and CLI changes on the trail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from access.support import bzzz_cli, cli_env
from mcp import Client

from bzzz.config import load_settings
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .support import call, sql

pytestmark = pytest.mark.integration


async def _with_trail(data_dir: Path) -> None:
    """A node's life on ``data_dir``: an agent announced, a lookup, a refused get."""
    settings = load_settings(environ={}, overrides={"node": {"data_dir": str(data_dir)}})
    async with Node(settings, bus=InMemoryBus()) as node:
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as client:
            await call(client, "bzzz_announce", {"agent_id": "cli-agent-1", "role": "architect"})
            await call(client, "bzzz_lookup", {"semantic_address": "bzzz://*"})
            await call(client, "bzzz_get", {"address": "bzzz://nobody"})


def _listed(env: dict[str, str], *args: str) -> list[dict[str, object]]:
    done = bzzz_cli(env, "audit", "list", "--json", *args)
    assert done.returncode == 0, done.stderr
    shown: list[dict[str, object]] = json.loads(done.stdout)["records"]
    return shown


async def test_list_filters_export_writes_lines_and_verify_passes(
    data_dir: Path, clean_env: dict[str, str], tmp_path: Path
) -> None:
    await _with_trail(data_dir)
    env = cli_env(clean_env, data_dir)

    everything = _listed(env)
    assert [r["action"] for r in everything] == [
        "tool:bzzz_announce",
        "tool:bzzz_lookup",
        "tool:bzzz_get",
    ]
    assert [r["outcome"] for r in everything] == ["ok", "ok", "AGENT_NOT_FOUND"]
    assert [r["seq"] for r in _listed(env, "--agent", "cli-agent-1")] == [1, 2, 3]
    assert _listed(env, "--principal", "tok-nobody") == []
    assert len(_listed(env, "--since", "1h")) == 3
    assert _listed(env, "--since", "2999-01-01T00:00:00") == []

    out = tmp_path / "audit.jsonl"
    done = bzzz_cli(env, "audit", "export", "--output", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["hash"] for line in lines] == [r["hash"] for r in everything]

    verified = bzzz_cli(env, "audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "3 records, 1 signed heads: intact" in verified.stdout


async def test_verify_fails_naming_the_edited_record(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    await _with_trail(data_dir)
    env = cli_env(clean_env, data_dir)
    sql(data_dir / "bzzz.db", "UPDATE audit_records SET outcome='ok' WHERE seq=3")

    done = bzzz_cli(env, "audit", "verify")

    assert done.returncode == 3
    assert "edited: record 3 was edited" in done.stdout
    as_json = json.loads(bzzz_cli(env, "audit", "verify", "--json").stdout)
    assert as_json["intact"] is False


async def test_cli_changes_are_recorded_allowed_or_refused(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    await _with_trail(data_dir)
    env = cli_env(clean_env, data_dir)

    redriven = bzzz_cli(env, "webhooks", "redrive", "--all")
    unknown = bzzz_cli(env, "webhooks", "redrive", "424242")
    refused = bzzz_cli(env, "subscriptions", "delete", "sub-not-there")
    listed = bzzz_cli(env, "subscriptions", "list", "--json")

    assert redriven.returncode == 0, redriven.stderr
    assert unknown.returncode == refused.returncode == 1
    assert listed.returncode == 0, listed.stderr
    changes = _listed(env)[3:]
    # Reads (subscriptions list) are not changes: three records, not four.
    assert [(r["action"], r["outcome"], r["principal"], r["session"]) for r in changes] == [
        ("cli:webhooks redrive", "ok", "local", "cli"),
        ("cli:webhooks redrive", "INVALID_PARAMETERS", "local", "cli"),
        ("cli:subscriptions delete", "INVALID_PARAMETERS", "local", "cli"),
    ]
    assert changes[2]["target"] == "sub-not-there"
    assert bzzz_cli(env, "audit", "verify").returncode == 0
