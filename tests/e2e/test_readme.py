"""The README runs: its tour, commands, client configurations and settings, against real nodes.

Every fenced block of README.md is one of: a tool call (```json <tool> [second]```: run in order
by two MCP clients, with both the stateless default client and the legacy handshake), an MCP
client configuration (```json```: connected to over stdio or HTTP), a settings file (```toml```:
the tour's node runs with it), `bzzz` commands (```console```: run against the tour's data
directory), shell lines (```bash```: their settings load and their commands parse), or a picture
or commands for machines this test cannot reach (```text```: docker and systemd, whose files
tests/test_deploy.py checks). A block of any other kind fails the test, so nothing in the
README goes unchecked.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from bzzz.cli import _parser
from bzzz.config import load_settings, unknown_variables

from .cluster import NatsCluster
from .support import (
    CALL_TIMEOUT,
    START_TIMEOUT,
    TEST_NETWORK_KEY_B64,
    HttpNode,
    bzzz_executable,
    call,
    eventually,
    http_session,
    node_env,
)

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
KINDS = {"json", "toml", "console", "bash", "text"}
TOOLS = {
    "bzzz_announce",
    "bzzz_lookup",
    "bzzz_get",
    "bzzz_post",
    "bzzz_thread",
    "bzzz_subscribe",
    "bzzz_reserve",
}
PLACEHOLDER = re.compile(r"<(task_id|thread_id|message_id|oldest|subscription_id)>")
# ```json hosted``` and ```toml hosted```: the hosted-agent examples, which tests/llm runs.
HOSTED = "hosted"


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced block: its info words, its text and the line it starts on."""

    info: list[str]
    body: str
    line: int

    @property
    def kind(self) -> str:
        return self.info[0] if self.info else ""


def blocks() -> list[Block]:
    """Every fenced block of the README (indented ones, in lists, included)."""
    found = []
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```(.*)$", lines[i])
        if opening is None:
            i += 1
            continue
        indent, start = len(opening.group(1)), i + 1
        body = []
        i += 1
        while not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:])
            i += 1
        found.append(Block(opening.group(2).split(), "\n".join(body), start))
        i += 1
    return found


def of_kind(kind: str) -> list[Block]:
    return [b for b in blocks() if b.kind == kind]


def tool_calls() -> list[Block]:
    return [b for b in of_kind("json") if len(b.info) > 1 and b.info[1] != HOSTED]


def test_every_block_is_of_a_kind_this_test_checks() -> None:
    for block in blocks():
        assert block.kind in KINDS, f"README line {block.line}: unchecked block {block.info}"
        if block.info[1:] == [HOSTED] and block.kind in ("json", "toml"):
            continue
        if block.kind == "json" and len(block.info) > 1:
            assert block.info[1] in TOOLS, f"README line {block.line}: {block.info}"
            assert block.info[2:] in ([], ["second"]), f"README line {block.line}: {block.info}"


def test_every_tool_call_is_labelled_with_its_tool_and_client() -> None:
    """What the info string says (GitHub does not show it), the line above says to a reader."""
    lines = README.read_text().splitlines()
    for block in tool_calls():
        who = "second" if block.info[2:] == ["second"] else "first"
        label = lines[block.line - 2].strip()
        assert label == f"*`{block.info[1]}`, {who} client:*", f"README line {block.line}"


def test_the_tour_calls_every_tool_and_every_thread_action() -> None:
    calls = [(b.info[1], json.loads(b.body)) for b in tool_calls()]
    assert {tool for tool, _ in calls} == TOOLS
    actions = {args["action"] for tool, args in calls if tool == "bzzz_thread"}
    assert actions == {
        "create",
        "join",
        "leave",
        "list",
        "summarize",
        "pause",
        "resume",
        "resolve",
        "close",
        "review",
    }


def test_the_readme_lists_the_message_types_the_node_acts_on() -> None:
    from bzzz.schemas import ACTED_ON_TYPES

    text = README.read_text()
    for kind in ACTED_ON_TYPES:
        assert f"`{kind}`" in text, kind


# --- the tour ------------------------------------------------------------------------------

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def _fill(text: str, known: dict[str, str], block: Block) -> dict[str, Any]:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in known, f"README line {block.line}: <{name}> before any answer gave it"
        return known[name]

    arguments: dict[str, Any] = json.loads(PLACEHOLDER.sub(value, text))
    return arguments


def _learn(tool: str, result: dict[str, Any], known: dict[str, str]) -> None:
    """The ids later blocks name: a task, a thread, the last posted message, a page's oldest."""
    if tool == "bzzz_post":
        known["message_id"] = result["message_id"]
        for task_id in (result.get("tasks") or {}).values():
            known["task_id"] = task_id
    if tool == "bzzz_thread" and result["action"] == "create":
        known["thread_id"] = result["thread_id"]
    if tool == "bzzz_subscribe" and result.get("callback_webhook"):
        known["subscription_id"] = result["subscription_id"]
    if tool == "bzzz_get" and result["content"].get("page", {}).get("oldest"):
        known["oldest"] = result["content"]["page"]["oldest"]


async def _tour(first: Call, second: Call) -> dict[str, str]:
    known: dict[str, str] = {}
    for block in tool_calls():
        tool = block.info[1]
        arguments = _fill(block.body, known, block)
        result = await (second if block.info[2:] == ["second"] else first)(tool, arguments)
        assert result.get("success") is True, f"README line {block.line}: {tool} -> {result}"
        _learn(tool, result, known)
    return known


def _caller(call_tool: Callable[..., Awaitable[Any]]) -> Call:
    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with anyio_timeout(CALL_TIMEOUT):
            result = await call_tool(tool, arguments)
        body: dict[str, Any] = result.structured_content
        return body

    return call


@contextlib.contextmanager
def anyio_timeout(seconds: float) -> Any:
    import anyio

    with anyio.fail_after(seconds):
        yield


@contextlib.asynccontextmanager
async def _stateless(url: str, name: str) -> AsyncIterator[Client]:
    """The SDK's default client (2026-07-28, no handshake), naming its caller in a header."""
    http = httpx2.AsyncClient(headers={"X-Bzzz-Session": name})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def _settings_file(tmp_path: Path) -> Path:
    [toml] = [b for b in of_kind("toml") if b.info == ["toml"]]
    path = tmp_path / "bzzz.toml"
    path.write_text(toml.body)
    return path


@pytest.fixture
async def tour_node(
    tmp_path: Path, clean_env: dict[str, str]
) -> AsyncIterator[HttpNode]:  # the node the tour runs on, with the README's settings file
    data_dir = tmp_path / "data"
    env = node_env(clean_env, data_dir, BZZZ_CONFIG=str(_settings_file(tmp_path)))
    node = HttpNode(data_dir, env, tmp_path / "logs")
    try:
        await node.start()
        yield node
    finally:
        await node.kill()
        from .support import kill_orphans

        kill_orphans(data_dir)


async def test_the_tour_runs_with_the_stateless_default_client(tour_node: HttpNode) -> None:
    async with (
        _stateless(tour_node.mcp_url, "tour-first") as first,
        _stateless(tour_node.mcp_url, "tour-second") as second,
    ):
        known = await _tour(_caller(first.call_tool), _caller(second.call_tool))
    assert set(known) == {"task_id", "thread_id", "message_id", "oldest", "subscription_id"}


async def test_the_tour_commands_and_client_configs_run_with_the_legacy_handshake(
    tour_node: HttpNode, tmp_path: Path
) -> None:
    async with http_session(tour_node.mcp_url) as first, http_session(tour_node.mcp_url) as second:
        known = await _tour(_caller(first.call_tool), _caller(second.call_tool))
        # The tour's escalation was resolved: the rule of the README's settings file fired.
        escalations = await _run_console("bzzz escalations --json", tour_node)
    assert set(known) == {"task_id", "thread_id", "message_id", "oldest", "subscription_id"}
    [escalation] = escalations["escalations"]
    assert escalation["rule"] == "Any Disagreement" and escalation["resolved"] is True

    # The README's order: clients connect while the node knows no credential; its console lines
    # then make tokens, after which an HTTP client connects only with one (the headers block).
    configs = [json.loads(block.body) for block in of_kind("json") if len(block.info) == 1]
    for config in configs:
        if "headers" not in _server_of(config):
            await _client_config(config, tour_node, tmp_path)

    tokens: list[str] = []
    for block in of_kind("console"):
        for line in block.body.splitlines():
            assert line.startswith("$ bzzz "), f"README line {block.line}: {line}"
            printed = await _run_console(line.removeprefix("$ "), tour_node)
            if isinstance(printed, dict) and "token" in printed:
                tokens.append(printed["token"])
    assert tokens, "the README's console lines create a token with --json"

    # Without a credential the node now refuses an HTTP client (401), as the README says; the
    # README's configuration with the headers block connects with the token just made.
    url = f"http://127.0.0.1:{tour_node.port}/mcp"
    async with httpx2.AsyncClient(timeout=START_TIMEOUT) as http:
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401, refused.text
    with_headers = [config for config in configs if "headers" in _server_of(config)]
    assert with_headers, "the README shows a client configuration with a token"
    for config in with_headers:
        await _client_config(config, tour_node, tmp_path, token=tokens[-1])


async def _run_console(command: str, node: HttpNode) -> Any:
    import asyncio

    argv = shlex.split(command)
    assert argv[0] == "bzzz"
    done = await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *argv[1:]],
        env=node.env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{command}: {done.stderr}"
    assert done.stdout.strip(), command
    return json.loads(done.stdout) if "--json" in argv else done.stdout


def _server_of(config: dict[str, Any]) -> dict[str, Any]:
    [server] = config["mcpServers"].values()
    return dict(server)


async def _client_config(
    config: dict[str, Any], node: HttpNode, tmp_path: Path, token: str | None = None
) -> None:
    """Connect as an MCP host would with the README's configuration; the seven tools are there."""
    server = _server_of(config)
    if "url" in server:
        assert server["url"] == "http://127.0.0.1:7331/mcp"
        url = server["url"].replace("7331", str(node.port))
        headers = {
            name: value.replace("bzzz_…", token or "")
            for name, value in server.get("headers", {}).items()
        }
        async with http_session(url, headers=headers) as session:
            tools = await session.list_tools()
    else:
        assert server["command"].endswith("/.venv/bin/bzzz")
        params = StdioServerParameters(command=bzzz_executable(), args=server["args"], env=node.env)
        with (tmp_path / "stdio-config.err").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio_timeout(START_TIMEOUT):
                    await session.initialize()
                    tools = await session.list_tools()
    assert {tool.name for tool in tools.tools} == TOOLS


# --- shell lines ---------------------------------------------------------------------------


def _shell_lines(block: Block) -> list[str]:
    joined = block.body.replace("\\\n", " ")
    return [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip()]


def _assignments(words: list[str]) -> dict[str, str]:
    """Take the leading NAME=value words off ``words``."""
    found = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        found[name] = value
    return found


def test_the_shell_lines_name_scripts_that_exist_and_settings_that_load(tmp_path: Path) -> None:
    root = README.parent
    for block in of_kind("bash"):
        exported: dict[str, str] = {}
        for line in _shell_lines(block):
            words = shlex.split(line)
            if words[:1] == ["export"]:
                exported |= _assignments(words[1:])
                continue
            assignments = exported | _assignments(words)
            if words[:1] == ["bash"]:
                script = root / words[1]
                assert script.is_file() and script.stat().st_mode & 0o111, line
                continue
            assert words[0] == "bzzz", f"README line {block.line}: {line}"
            args = _parser().parse_args(words[1:])
            assert args.command in ("serve", "identity", "node"), line
            env = assignments | {"BZZZ_DATA_DIR": str(tmp_path / "d")}
            assert unknown_variables(env) == [], line
            load_settings(environ=env)


# --- many nodes, one network: the README's lines on a secured 3-server cluster -------------------


def _many_nodes_block() -> Block:
    [block] = [b for b in of_kind("bash") if "bzzz node admit" in b.body]
    return block


def _on_loopback(line: str, cluster: NatsCluster, home: Path, public_key: str | None) -> str:
    """The line with the machines' addresses, secrets and home of this test."""
    for i, server in enumerate(cluster.servers):
        line = line.replace(f"10.0.0.{i + 1}:4222", f"127.0.0.1:{server.port}")
    line = line.replace("PASSWORD", cluster.password).replace("~/", f"{home}/")
    line = line.replace("NETWORK_KEY", TEST_NETWORK_KEY_B64)
    if "PUBLIC_KEY" in line.split("#")[0]:
        assert public_key is not None, "bzzz node admit PUBLIC_KEY before bzzz identity"
        line = line.replace("PUBLIC_KEY", public_key)
    return line


async def _run_bzzz(args: list[str], env: dict[str, str]) -> str:
    import asyncio

    done = await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"bzzz {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture
async def secured_cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """The README's secured 3-server cluster, on loopback."""
    running = NatsCluster(tmp_path / "cluster", secured=True)
    try:
        await running.start()
        yield running
    finally:
        await running.close()


async def test_the_many_nodes_lines_run_as_written_on_a_secured_cluster(
    secured_cluster: NatsCluster, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    home = tmp_path / "home"
    exported: dict[str, str] = {}
    nodes: list[HttpNode] = []
    public_key: str | None = None
    try:
        for line in _shell_lines(_many_nodes_block()):
            words = shlex.split(_on_loopback(line, secured_cluster, home, public_key))
            if words[:1] == ["export"]:
                exported |= _assignments(words[1:])
                continue
            env = clean_env | {"PYTHONUNBUFFERED": "1"} | exported | _assignments(words)
            assert words[0] == "bzzz", line
            if words[1] == "serve":
                [port] = [int(w) for w in words[words.index("--port") + 1 :][:1]]
                node = HttpNode(Path(env["BZZZ_DATA_DIR"]), env, tmp_path / "logs")
                assert port in (7331, 7332)  # on loopback the test picks free ports instead
                await node.start()
                nodes.append(node)
                continue
            printed = await _run_bzzz(words[1:], env)
            if words[1] == "identity":
                [public_key] = re.findall(r"^public_key\s+(\S+)$", printed, re.MULTILINE)
        a, b = nodes
        listed = json.loads(await _run_bzzz(["node", "list", "--json"], a.env))
        assert len(listed["nodes"]) == 2 and public_key in {
            n["public_key"] for n in listed["nodes"]
        }
        # Admitted, B's agents are everyone's: announced on B, found on A.
        async with http_session(b.mcp_url) as on_b:
            announced = await call(on_b, "bzzz_announce", {"agent_id": "rev-b", "role": "reviewer"})
            assert announced["success"] is True, announced
        async with http_session(a.mcp_url) as on_a:
            found = await eventually(
                lambda: call(on_a, "bzzz_lookup", {"semantic_address": "bzzz://*:reviewer@*"}),
                lambda result: [m["id"] for m in result.get("matches", [])] == ["rev-b"],
            )
        assert found["success"] is True
    finally:
        for node in nodes:
            await node.kill()
            from .support import kill_orphans

            kill_orphans(node.data_dir)
