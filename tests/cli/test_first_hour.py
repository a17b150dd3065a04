"""The first hour with BZZZ: mistakes named, and the work on the network seen from the shell.

A misspelt variable is warned with its fix, a bad ``--port`` is blamed on ``--port``, `bzzz
config show` and `bzzz status` say what a running node runs with, and `bzzz agents`, `threads`,
`tasks`, `inbox` and `status` print one JSON object each, beside a running node and without
one (spawned `bzzz serve` and CLI processes, as a person runs them).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from access.support import bzzz_cli, cli_env
from e2e.support import (
    TEST_NETWORK_KEY_B64,
    HttpNode,
    bzzz_executable,
    call,
    http_session,
    node_env,
)

from bzzz.clock import ManualClock
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput

pytestmark = pytest.mark.integration

WORK_COMMANDS = [
    ["agents"],
    ["threads"],
    ["tasks"],
    ["inbox", "dev-7"],
    ["status"],
]


def one_object(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a `--json` command printed (and nothing else on stdout)."""
    assert done.returncode == 0, done.stderr
    decoder = json.JSONDecoder()
    text = done.stdout.strip()
    found, end = decoder.raw_decode(text)
    assert end == len(text), f"more than one JSON value on stdout: {text[end:][:200]!r}"
    assert isinstance(found, dict)
    return found


def real_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`bzzz ARGS` as the console script (its own process start, its own environment)."""
    return subprocess.run(
        [bzzz_executable(real=True), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unknown_variable_is_warned_on_stderr_with_the_setting_it_meant(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    env = cli_env(clean_env, tmp_path / "data") | {"BZZZ_PORT": "22007"}

    done = real_cli(env, "config", "show", "--json")

    warning = "BZZZ_PORT is not a setting and is ignored; did you mean BZZZ_HTTP_PORT?"
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"bzzz: warning: {warning}"]
    shown = one_object(done)
    assert shown["unknown_settings"] == [warning]
    assert shown["node"]["http_port"] == 7331  # ignored, as the warning says


def test_a_port_out_of_range_names_the_port_option(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    env = cli_env(clean_env, tmp_path / "data")

    done = real_cli(env, "serve", "--port", "99999")

    assert done.returncode == 2
    assert "argument --port: 99999 is not a port number (0-65535)" in done.stderr
    assert "BZZZ_HTTP_PORT" not in done.stderr
    assert not (tmp_path / "data").exists(), "nothing starts on a bad option"


async def _work_on(node: HttpNode) -> dict[str, Any]:
    """Two agents of project shop, a task for one, a thread between them (over MCP)."""
    async with http_session(node.mcp_url) as arch, http_session(node.mcp_url) as dev:
        await call(dev, "bzzz_announce", {"agent_id": "dev-7", "role": "dev", "project": "shop"})
        await call(arch, "bzzz_announce", {"agent_id": "arch", "role": "arch", "project": "shop"})
        posted = await call(
            arch,
            "bzzz_post",
            {
                "target_address": "bzzz://dev-7",
                "message_type": "task_assignment",
                "content": {"description": "add the refund route", "task_type": "code"},
            },
        )
        thread = await call(
            arch,
            "bzzz_thread",
            {"action": "create", "participants": ["dev-7"], "topic": "refund API"},
        )
    return {"posted": posted, "thread_id": thread["thread_id"]}


async def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(bzzz_cli, env, *args)


async def test_the_work_commands_print_one_json_object_beside_a_running_node_and_without(
    data_dir: Path, clean_env: dict[str, str], tmp_path: Path
) -> None:
    node = HttpNode(data_dir, node_env(clean_env, data_dir), tmp_path / "logs")
    # The node's network key (not kept in the data directory): the CLI opens sealed content.
    env = cli_env(clean_env, data_dir) | {"BZZZ_NETWORK_KEY": TEST_NETWORK_KEY_B64}
    await node.start()
    try:
        work = await _work_on(node)
        beside = {" ".join(c): one_object(await _cli(env, *c, "--json")) for c in WORK_COMMANDS}
        others = one_object(await _cli(env, "agents", "--project", "blog", "--json"))
        typo = await _cli(env, "inbox", "dev7", "--json")
        shown = one_object(await _cli(env, "config", "show", "--json"))
        node.send(signal.SIGTERM)
        assert await node.wait_exit() == 0
    finally:
        await node.kill()
    without = {" ".join(c): one_object(await _cli(env, *c, "--json")) for c in WORK_COMMANDS}
    trail = one_object(await _cli(env, "audit", "list", "--json"))
    keyless = await _cli(cli_env(clean_env, data_dir), "threads", "--json")

    task_id = work["posted"]["tasks"]["dev-7"]
    for seen in (beside, without):
        assert sorted(a["id"] for a in seen["agents"]["agents"]) == ["arch", "dev-7"]
        assert [t["id"] for t in seen["threads"]["threads"]] == [work["thread_id"]]
        assert [(t["id"], t["agent_id"]) for t in seen["tasks"]["tasks"]] == [(task_id, "dev-7")]
        assert [m["id"] for m in seen["inbox dev-7"]["messages"]] == [work["posted"]["message_id"]]
        assert seen["status"]["store"]["agents"]["total"] == 2
    assert others == {"agents": [], "count": 0, "total": 0}
    assert (typo.returncode, typo.stdout) == (1, "")
    assert "no agent 'dev7' at that address; did you mean 'dev-7'?" in typo.stderr
    # The start-up log (stderr) says where MCP and the dashboard are.
    logged = node.stderr_path.read_text()
    assert f"MCP at {node.mcp_url}" in logged and f"dashboard at {node.base_url}/ui" in logged
    [running] = beside["status"]["running"]
    assert (running["port"], running["health"]["state"]) == (node.port, "running")
    assert running["source"] == str(data_dir / "slots" / "0.serving.json")
    assert without["status"]["running"] == []
    # Without the network key the content stays sealed: said in one line, no traceback.
    assert (keyless.returncode, keyless.stdout) == (2, "")
    assert keyless.stderr.startswith("bzzz: cannot open the store's sealed content")
    assert "BZZZ_NETWORK_KEY" in keyless.stderr and "Traceback" not in keyless.stderr
    # config show beside the node: what the node runs with, not this shell's default port.
    [served] = shown["running"]
    assert (served["port"], served["mcp_url"]) == (node.port, node.mcp_url)
    assert served["dashboard_url"] == f"{node.base_url}/ui"
    assert served["differs"]["node.http_port"] == {"configured": 7331, "running": node.port}
    # Reads of content are on the audit trail as the local user's.
    reads = [(r["action"], r["target"]) for r in trail["records"] if r["session"] == "cli"]
    assert reads.count(("cli:inbox", "dev-7")) == 2
    assert ("cli:tasks", None) in reads and ("cli:threads", None) in reads


def test_a_data_directory_where_no_node_ran(tmp_path: Path, clean_env: dict[str, str]) -> None:
    env = cli_env(clean_env, tmp_path / "data")

    status = one_object(bzzz_cli(env, "status", "--json"))
    agents = bzzz_cli(env, "agents", "--json")

    assert (status["running"], status["store"]) == ([], None)
    assert agents.returncode == 1
    assert agents.stdout == ""
    assert "no node in" in agents.stderr
    assert not (tmp_path / "data").exists(), "a read creates nothing"


async def test_the_filters_keep_a_projects_an_agents_and_the_unread_work(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    settings = load_settings(environ={}, overrides={"node": {"data_dir": str(data_dir)}})
    env = cli_env(clean_env, data_dir)
    clock = ManualClock()
    async with Node(settings, bus=InMemoryBus(), clock=clock) as node:
        for agent_id, project in [("dev-7", "shop"), ("arch", "shop"), ("qa", "blog")]:
            params = AnnounceInput(agent_id=agent_id, role=agent_id, project=project)
            await node.agents.announce(Caller(f"s-{agent_id}"), params)
        await node.agents.session_ended(Caller("s-qa"))

        async def send(session: str, target: str, text: str, kind: str = "text") -> str:
            clock.advance(1)
            content = {"text": text, "description": text}
            params = PostInput(target_address=target, message_type=kind, content=content)
            posted = await node.conversations.post(Caller(session), params)
            return str(posted["message_id"])

        read = await send("s-arch", "bzzz://dev-7", "read by dev-7")
        await node.inbox.mark_read(Caller("s-dev-7"), "dev-7", [read])  # dev-7 marks it read
        unread = await send("s-arch", "bzzz://dev-7", "came after", kind="task_assignment")
        runs = {
            name: await asyncio.to_thread(bzzz_cli, env, *args, "--json")
            for name, args in {
                "inbox": ["inbox", "dev-7"],
                "unread": ["inbox", "dev-7", "--unread"],
                "online shop": ["agents", "--project", "shop", "--online"],
                "role": ["agents", "--role", "qa"],
                "shop tasks": ["tasks", "--project", "shop"],
                "blog tasks": ["tasks", "--project", "blog"],
                "dev-7 tasks": ["tasks", "--agent", "dev-7"],
                "dev-7 threads": ["threads", "--agent", "dev-7"],
            }.items()
        }

    seen = {name: one_object(done) for name, done in runs.items()}
    assert len(seen["inbox"]["messages"]) == 2
    assert [m["id"] for m in seen["unread"]["messages"]] == [unread]
    assert [m["read"] for m in seen["inbox"]["messages"]] == [False, True]
    assert seen["unread"]["unread_only"] is True
    assert sorted(a["id"] for a in seen["online shop"]["agents"]) == ["arch", "dev-7"]
    assert [(a["id"], a["status"]) for a in seen["role"]["agents"]] == [("qa", "offline")]
    for name in ("shop tasks", "dev-7 tasks"):
        assert [(t["agent_id"], t["project"]) for t in seen[name]["tasks"]] == [("dev-7", "shop")]
    assert seen["blog tasks"] == {"tasks": [], "count": 0}
    assert seen["dev-7 threads"] == {"threads": [], "count": 0}
