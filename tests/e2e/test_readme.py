"""The README runs: its tour, commands, client configurations and settings, against real nodes.

Every fenced block of README.md is one of: a tool call (```json <tool> [second]```: run in order
by two MCP clients, with both the stateless default client and the legacy handshake), an MCP
client configuration (```json```: connected to over stdio or HTTP), a settings file (```toml```:
the tour's node runs with it), `bzzz` commands (```console```: run against the tour's data
directory), shell lines (```bash```: their settings load and their commands parse; the
many-nodes lines run), or a picture or commands for machines this test cannot reach (```text```:
docker and systemd, whose files tests/test_deploy.py checks). Two ```text``` blocks run too: the
secured cluster's server configuration (three nats-servers on loopback run with it, the
many-nodes lines against them) and the compose network's admission lines (`docker compose exec`
standing for local nodes). A block of any other kind fails the test, so nothing in the README
goes unchecked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import shlex
import shutil
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
from bzzz.network import partitions

from .cluster import ClusterServer, NatsCluster
from .conftest import NodeFactory
from .support import (
    CALL_TIMEOUT,
    START_TIMEOUT,
    TEST_NETWORK_KEY_B64,
    HttpNode,
    bzzz_executable,
    call,
    eventually,
    http_session,
    kill_orphans,
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


def test_the_partition_mapping_is_the_one_nodes_probe_for() -> None:
    [block] = [b for b in of_kind("text") if b.body.startswith("mappings {")]
    assert block.body.strip() == "\n".join(partitions.mapping_config(3))


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


@dataclass(frozen=True, slots=True)
class Tour:
    """What the tour's answers gave: the ids later blocks name, the subscriptions it made."""

    known: dict[str, str]
    subscriptions: list[str]


async def _tour(first: Call, second: Call) -> Tour:
    known: dict[str, str] = {}
    subscriptions: list[str] = []
    for block in tool_calls():
        tool = block.info[1]
        arguments = _fill(block.body, known, block)
        result = await (second if block.info[2:] == ["second"] else first)(tool, arguments)
        assert result.get("success") is True, f"README line {block.line}: {tool} -> {result}"
        _learn(tool, result, known)
        if tool == "bzzz_subscribe" and arguments.get("action", "subscribe") == "subscribe":
            subscriptions.append(result["subscription_id"])
    return Tour(known, subscriptions)


async def _left_on(node: HttpNode, tour: Tour) -> list[tuple[str, str | None]]:
    """The tour's subscriptions the node still has: (subscriber, webhook) of each."""
    shown = await _run_console("bzzz subscriptions list --json", node)
    return [
        (s["subscriber_id"], s["callback_webhook"])
        for s in shown["subscriptions"]
        if s["subscription_id"] in tour.subscriptions
    ]


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
        kill_orphans(data_dir)


async def test_the_tour_runs_with_the_stateless_default_client_and_unsubscribes_its_webhook(
    tour_node: HttpNode,
) -> None:
    async with (
        _stateless(tour_node.mcp_url, "tour-first") as first,
        _stateless(tour_node.mcp_url, "tour-second") as second,
    ):
        tour = await _tour(_caller(first.call_tool), _caller(second.call_tool))
    assert set(tour.known) == {"task_id", "thread_id", "message_id", "oldest", "subscription_id"}
    # It subscribed twice and leaves no webhook behind: the second client unsubscribed it. A
    # client without a session leaves its plain subscription to its agent's lease.
    assert len(tour.subscriptions) == 2
    await eventually(
        lambda: _left_on(tour_node, tour), lambda left: left == [("reviewer-001", None)]
    )


async def test_the_tour_commands_and_client_configs_run_with_the_legacy_handshake(
    tour_node: HttpNode, tmp_path: Path
) -> None:
    async with http_session(tour_node.mcp_url) as first, http_session(tour_node.mcp_url) as second:
        tour = await _tour(_caller(first.call_tool), _caller(second.call_tool))
        # The tour's escalation was resolved: the rule of the README's settings file fired.
        escalations = await _run_console("bzzz escalations --json", tour_node)
    assert set(tour.known) == {"task_id", "thread_id", "message_id", "oldest", "subscription_id"}
    # The tour leaves no subscription behind: its sessions' ended with them, and the second
    # client unsubscribed its webhook, which would outlive its session.
    assert len(tour.subscriptions) == 2
    await eventually(lambda: _left_on(tour_node, tour), lambda left: left == [])
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
    line = re.sub(r"\bPASSWORD\b", cluster.password, line).replace("~/", f"{home}/")
    # The placeholder, not the name of BZZZ_NETWORK_KEY it is the value of.
    line = re.sub(r"\bNETWORK_KEY\b", TEST_NETWORK_KEY_B64, line)
    if re.search(r"\bPUBLIC_KEY\b", line.split("#")[0]):
        assert public_key is not None, "bzzz node admit PUBLIC_KEY before bzzz identity"
        line = re.sub(r"\bPUBLIC_KEY\b", public_key, line)
    return line


async def _run_bzzz(args: list[str], env: dict[str, str]) -> str:
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


def _cluster_config_block() -> Block:
    [block] = [b for b in of_kind("text") if b.body.startswith("server_name: n1\n")]
    return block


class ReadmeCluster(NatsCluster):
    """Three servers, each run with the README's configuration of ``n1``, on loopback.

    Server k's is n1's with machines 1 and k swapped (its name, and its routes to the other
    two), as the README says of ``n2`` and ``n3``. Loopback has one address, so each machine's
    client port 4222 and route port 6222 become ports of its own; its store is a directory of
    the test's; PASSWORD, ADMIN_PASSWORD and ROUTE_PASSWORD secrets of its own.
    """

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, secured=True)
        for number, server in enumerate(self.servers, start=1):
            server.name = f"n{number}"
            server.directory = directory / server.name
        self.admin_password = secrets.token_urlsafe(24)

    def _config(self, server: ClusterServer) -> str:
        k = self.servers.index(server) + 1

        def route_port(machine: re.Match[str]) -> str:
            j = int(machine.group(1))
            other = self.servers[(k if j == 1 else 1 if j == k else j) - 1]
            return f"127.0.0.1:{other.cluster_port}"

        passwords = {
            "PASSWORD": self.password,
            "ADMIN_PASSWORD": self.admin_password,
            "ROUTE_PASSWORD": self.route_password,
        }
        text = _cluster_config_block().body
        text = text.replace("server_name: n1", f"server_name: {server.name}")
        text = text.replace("0.0.0.0:4222", f"127.0.0.1:{server.port}")
        text = text.replace("0.0.0.0:6222", f"127.0.0.1:{server.cluster_port}")
        text = re.sub(r"10\.0\.0\.(\d):6222", route_port, text)
        text = text.replace('"/var/lib/nats"', f'"{server.directory / "store"}"')
        text = re.sub(r"\b(?:ADMIN_|ROUTE_)?PASSWORD\b", lambda m: passwords[m.group(0)], text)
        unplaced = re.findall(r"10\.0\.0\.\S*|0\.0\.0\.0\S*|/var/\S*|PASSWORD", text)
        assert not unplaced, f"README line {_cluster_config_block().line}: {unplaced}"
        return text


@pytest.fixture
async def secured_cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """The README's secured 3-server cluster, its servers run with its configuration block."""
    running = ReadmeCluster(tmp_path / "cluster")
    try:
        # Ready once a client logged in and made an R3 stream: the routes logged in too.
        await running.start()
        yield running
    finally:
        await running.close()


async def _post_from_b_reaches_a(a: HttpNode, b: HttpNode) -> None:
    """What admitting B lets through: B's agent posts to A's agent, and A delivers it."""
    async with http_session(a.mcp_url) as on_a, http_session(b.mcp_url) as on_b:
        await call(on_a, "bzzz_announce", {"agent_id": "arch-a", "role": "architect"})
        await call(on_b, "bzzz_announce", {"agent_id": "rev-b", "role": "reviewer"})
        await eventually(
            lambda: call(on_b, "bzzz_lookup", {"semantic_address": "bzzz://*:architect@*"}),
            lambda found: [m["id"] for m in found["matches"]] == ["arch-a"],
        )
        await call(
            on_b,
            "bzzz_post",
            {"target_address": "bzzz://arch-a", "message_type": "question",
             "content": {"text": "admitted?"}},
        )  # fmt: skip
        inbox = await eventually(
            lambda: call(on_a, "bzzz_get", {"address": "bzzz://arch-a/inbox"}),
            lambda got: len(got["content"]["messages"]) == 1,
        )
    [message] = inbox["content"]["messages"]
    assert message["sender"] == "rev-b" and message["content"] == {"text": "admitted?"}


async def test_the_many_nodes_lines_run_as_written_on_the_readme_cluster(
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
            if words[1:3] == ["node", "admit"]:
                # Admission is on by default: until this line, the network admits A alone.
                await eventually(
                    nodes[0].health,
                    lambda health: (
                        health["projector"]["admission"] == {"enforced": True, "admitted": 1}
                    ),
                )
            printed = await _run_bzzz(words[1:], env)
            if words[1] == "identity":
                [public_key] = re.findall(r"^public_key\s+(\S+)$", printed, re.MULTILINE)
        a, b = nodes
        listed = json.loads(await _run_bzzz(["node", "list", "--json"], a.env))
        assert len(listed["nodes"]) == 2 and public_key in {
            n["public_key"] for n in listed["nodes"]
        }
        await _post_from_b_reaches_a(a, b)
    finally:
        for node in nodes:
            await node.kill()
            kill_orphans(node.data_dir)


# --- the compose network's admission: its lines, with `docker compose exec` on local nodes --------


def _compose_admission_lines() -> list[str]:
    [block] = [b for b in of_kind("text") if "docker compose" in b.body and "node admit" in b.body]
    lines = [line for line in block.body.splitlines() if re.search(r"bzzz (identity|node)", line)]
    assert len(lines) == 2, f"README line {block.line}: {lines}"
    return lines


def _compose_exec(services: dict[str, dict[str, str]], shell_env: dict[str, str]) -> str:
    """A shell function ``docker``: ``compose -f FILE exec [-T] SERVICE CMD…`` runs CMD here.

    CMD runs with the environment of SERVICE's node (what differs from the shell's).
    """
    arms = []
    for name, env in services.items():
        own = [shlex.quote(f"{k}={v}") for k, v in env.items() if shell_env.get(k) != v]
        arms.append(f'    {name}) {" ".join(own)} "$@" ;;')
    return "\n".join(
        [
            "docker() {",
            '  [ "$1 $2" = "compose -f" ] && [ -f "$3" ] && [ "$4" = exec ] || return 64',
            "  shift 4",
            '  if [ "$1" = -T ]; then shift; fi',
            '  local service="$1"',
            "  shift",
            '  case "$service" in',
            *arms,
            '    *) echo "no service $service" >&2; return 64 ;;',
            "  esac",
            "}",
        ]
    )


async def test_the_compose_admission_lines_admit_the_second_node_as_written(
    make_node: NodeFactory,
) -> None:
    assert shutil.which("jq"), "the README's compose lines pipe `bzzz identity --json` into jq"
    a, b = make_node("bzzz-a"), make_node("bzzz-b")
    await a.start()  # the first node: it admits itself
    await b.start()
    # `bzzz` in the lines is the one the tests run (in the image, on the containers' PATH).
    on_path = {"PATH": f"{Path(bzzz_executable()).parent}:{a.env['PATH']}"}
    services = {"bzzz-a": a.env | on_path, "bzzz-b": b.env | on_path}
    shell_env = services["bzzz-a"]
    script = "\n".join(
        [
            "set -euo pipefail",
            _compose_exec(services, shell_env),
            *_compose_admission_lines(),
        ]
    )
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script],
        cwd=README.parent,
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(await _run_bzzz(["identity", "--json"], b.env))
    listed = json.loads(await _run_bzzz(["node", "list", "--json"], a.env))
    assert shown["public_key"] in {n["public_key"] for n in listed["nodes"]}
    await _post_from_b_reaches_a(a, b)
