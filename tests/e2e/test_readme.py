"""The README runs: its two commands, its clients, its SDK code, its team and its tour.

Every fenced block of README.md is of a kind tests/e2e/markdown.py names, and each is run here
against spawned nodes: the Claude Code line and the Cursor configuration connect with a token
as written; the Python SDK code runs as it stands (on an open node, and with a token); the
team's lines make your admin token and a token per agent, which is that agent; the tour
runs on the default settings with the SDK's default client and the team's tokens. Two nodes
serve the module: one open (no credential ever), one with tokens.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import pytest_asyncio

from .markdown import (
    README,
    ROOT,
    TOOLS,
    Block,
    blocks,
    caller,
    client_configs,
    kind_problems,
    new_token,
    of_kind,
    on_port,
    pages,
    run_bzzz,
    run_tour,
    server_of,
    shell_lines,
    spawned,
    stateless,
    tool_calls,
    tool_names_over_http,
)
from .support import (
    START_TIMEOUT,
    HttpNode,
    eventually,
    kill_orphans,
    node_env,
    stdio_session,
)

pytestmark = pytest.mark.integration
SHARED = pytest.mark.asyncio(loop_scope="module")


def _bash_block(needle: str) -> Block:
    [block] = [b for b in of_kind(README, "bash") if needle in b.body]
    return block


# --- reading -----------------------------------------------------------------------------------


def test_every_block_is_of_a_kind_a_test_checks() -> None:
    assert kind_problems(README) == []


def test_the_readme_reads_in_ten_minutes_and_links_every_docs_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)[#)]", text))
    assert linked == {str(page.relative_to(ROOT)) for page in pages()}


def test_the_two_commands_come_first_and_name_scripts_that_exist() -> None:
    first = blocks(README)[0]
    assert [line.split("#")[0].strip() for line in first.body.splitlines()] == [
        "bash scripts/serve",
        "bash .ci/run",
    ]
    for line in shell_lines(first):
        script = ROOT / shlex.split(line)[1]
        assert script.is_file() and script.stat().st_mode & 0o111, line


# --- the nodes ---------------------------------------------------------------------------------


async def _spawned(directory: Path, **extra: str) -> HttpNode:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    return await spawned(directory, node_env(base, directory / "data", **extra))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def open_node(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HttpNode]:
    """A node on the default settings that never knows a credential: every caller is admin."""
    node = await _spawned(tmp_path_factory.mktemp("open"))
    try:
        yield node
    finally:
        await node.kill()
        kill_orphans(node.data_dir)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team_node(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HttpNode]:
    """A node on the default settings whose callers hold tokens (the tests make them)."""
    node = await _spawned(tmp_path_factory.mktemp("team"))
    try:
        yield node
    finally:
        await node.kill()
        kill_orphans(node.data_dir)


# --- clients -----------------------------------------------------------------------------------


@SHARED
async def test_the_claude_code_line_connects_with_its_header(team_node: HttpNode) -> None:
    token = await new_token(team_node.env, "claude-code")
    [line] = shell_lines(_bash_block("claude mcp add"))
    words = shlex.split(line.replace("$TOKEN", token))
    # claude mcp add NAME URL with --transport T and --header "K: V" anywhere among them:
    # the options as Claude Code reads them, then what it would send.
    assert words[:3] == ["claude", "mcp", "add"], line
    rest, options, headers, positional = words[3:], {}, {}, []
    while rest:
        word = rest.pop(0)
        if not word.startswith("--"):
            positional.append(word)
            continue
        value = rest.pop(0)
        if word == "--header":
            name, _, header = value.partition(": ")
            headers[name] = header
        else:
            options[word] = value
    assert options == {"--transport": "http"}, line
    name, url = positional
    assert name == "bzzz" and headers == {"Authorization": f"Bearer {token}"}
    assert await tool_names_over_http(on_port(url, team_node.port), headers) == TOOLS


@SHARED
async def test_the_cursor_configuration_connects_with_the_token_in_its_environment(
    team_node: HttpNode,
) -> None:
    token = await new_token(team_node.env, "cursor")
    [block] = client_configs(README)
    assert "Cursor" in README.read_text().splitlines()[block.line - 4]
    server = server_of(json.loads(block.body))
    # Cursor fills ${env:NAME} from its environment.
    environment = {"BZZZ_TOKEN": token}
    headers = {
        name: re.sub(r"\$\{env:(\w+)\}", lambda m: environment[m.group(1)], value)
        for name, value in server["headers"].items()
    }
    assert headers == {"Authorization": f"Bearer {token}"}
    assert await tool_names_over_http(on_port(server["url"], team_node.port), headers) == TOOLS


# --- the Python SDK ----------------------------------------------------------------------------


async def _run_sdk_code(node: HttpNode, token: str | None) -> str:
    [block] = of_kind(README, "python")
    env = {k: v for k, v in node.env.items() if not k.startswith("BZZZ_")}
    env["BZZZ_URL"] = node.mcp_url
    if token is not None:
        env["TOKEN"] = token
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", block.body],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{block.where}: {done.stderr}"
    return done.stdout


def _printed_as_the_readme_says() -> str:
    [said] = re.findall(r"^It prints `([^`]+)`", README.read_text(), re.MULTILINE)
    return said


@SHARED
async def test_the_sdk_code_runs_as_written_on_an_open_node(open_node: HttpNode) -> None:
    printed = await _run_sdk_code(open_node, token=None)
    assert printed.strip() == _printed_as_the_readme_says()


@SHARED
async def test_the_sdk_code_runs_as_written_with_the_agents_token(
    team_node: HttpNode, team_tokens: dict[str, str]
) -> None:
    printed = await _run_sdk_code(team_node, team_tokens["dev-1"])
    assert printed.strip() == _printed_as_the_readme_says()
    # With a token, the node refuses the same code without one.
    [block] = of_kind(README, "python")
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", block.body],
        env={"BZZZ_URL": team_node.mcp_url, "PATH": team_node.env["PATH"]},
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode != 0 and "MCPError" in done.stderr, done.stderr[-2000:]


# --- a team in five minutes --------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team_tokens(team_node: HttpNode) -> dict[str, str]:
    """The team's lines run as written on the team node's data directory: agent -> token."""
    tokens: dict[str, str] = {}
    for line in shell_lines(_bash_block("bzzz init")):
        words = shlex.split(line)
        assert words[0] == "bzzz", line
        printed = await run_bzzz(words[1:], team_node.env)
        if words[1] == "init":
            # Your admin token, shown once, and the client lines that carry it.
            assert re.search(r"^\s+bzzz_\S+$", printed, re.MULTILINE), printed
            assert "claude mcp add" in printed and ".cursor/mcp.json" in printed, printed
        if words[1:3] == ["token", "create"]:
            # The token alone on the last line; it is the agent the line names.
            tokens[words[words.index("--agent") + 1]] = printed.strip().splitlines()[-1]
    assert sorted(tokens) == ["dev-1", "reviewer-1"], tokens
    return tokens


@SHARED
async def test_the_team_lines_make_a_token_per_agent_that_is_that_agent(
    team_node: HttpNode, team_tokens: dict[str, str]
) -> None:
    roles = {"dev-1": "developer", "reviewer-1": "reviewer"}
    for agent_id, token in team_tokens.items():
        async with stateless(team_node.mcp_url, {"Authorization": f"Bearer {token}"}) as client:
            call = caller(client.call_tool)
            made = await call(
                "bzzz_announce", {"agent_id": agent_id, "role": roles[agent_id], "project": "shop"}
            )
            assert made["success"] is True, made
            # The token is its agent and no other.
            other = await call(
                "bzzz_announce",
                {"agent_id": f"not-{agent_id}", "role": roles[agent_id], "project": "shop"},
            )
            assert other["success"] is False, other
    # Without a token the node now refuses an HTTP client.
    async with httpx2.AsyncClient(timeout=START_TIMEOUT) as http:
        refused = await http.post(
            team_node.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        )
    assert refused.status_code == 401, refused.text


@SHARED
async def test_the_coding_agent_lines_guard_a_repository_and_write_the_claude_code_hooks(
    team_node: HttpNode, team_tokens: dict[str, str], tmp_path: Path
) -> None:
    """The two install lines run as written in a clone, with the agent's token in BZZZ_TOKEN:
    the clone's commit of a path another agent holds is refused naming the holder."""
    repo = tmp_path / "shop"
    env = {**team_node.env, "BZZZ_TOKEN": team_tokens["dev-1"]}
    env |= {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.invalid"}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, timeout=60
        )

    repo.mkdir()
    assert git("init", "-q").returncode == 0
    (repo / "app.py").write_text("one\n")
    assert git("add", ".").returncode == 0
    assert git("commit", "-q", "-m", "first").returncode == 0
    for line in shell_lines(_bash_block("bzzz guard install")):
        words = shlex.split(line)
        assert words[0] == "bzzz", line
        await run_bzzz(words[1:], env, cwd=repo)
    assert "bzzz" in (repo / ".git" / "hooks" / "pre-commit").read_text()
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    assert {"SessionStart", "UserPromptSubmit", "PreToolUse"} <= set(settings["hooks"])
    assert team_tokens["dev-1"] not in json.dumps(settings)  # the settings hold no token

    tokens = {agent: {"Authorization": f"Bearer {t}"} for agent, t in team_tokens.items()}
    roles = {"dev-1": "developer", "reviewer-1": "reviewer"}
    for agent_id, headers in tokens.items():
        async with stateless(team_node.mcp_url, headers) as client:
            made = await caller(client.call_tool)(
                "bzzz_announce", {"agent_id": agent_id, "role": roles[agent_id], "project": "shop"}
            )
            assert made["success"] is True, made
    async with stateless(team_node.mcp_url, tokens["reviewer-1"]) as client:
        held = await caller(client.call_tool)(
            "bzzz_reserve", {"agent_id": "reviewer-1", "paths": ["app.py"], "ttl": 600}
        )
        assert held["success"] is True, held
    try:
        (repo / "app.py").write_text("two\n")
        assert git("add", "app.py").returncode == 0
        refused = await asyncio.to_thread(git, "commit", "-q", "-m", "change app.py")
        assert refused.returncode != 0, refused
        assert "reviewer-1" in refused.stdout + refused.stderr
    finally:
        # The team node is shared with the tour, which counts reviewer-1's reservations.
        async with stateless(team_node.mcp_url, tokens["reviewer-1"]) as client:
            released = await caller(client.call_tool)(
                "bzzz_reserve", {"action": "release", "reservation_id": held["reservation"]["id"]}
            )
        assert released["success"] is True, released


# --- the tour ----------------------------------------------------------------------------------


def test_the_tour_calls_every_tool() -> None:
    assert {b.info[1] for b in tool_calls(README)} == TOOLS


@SHARED
async def test_the_tour_runs_on_the_default_settings_with_the_sdks_default_client(
    team_node: HttpNode, team_tokens: dict[str, str]
) -> None:
    # The team's tokens: bob's is reviewer-1 (the first client), alice's dev-1 (the second).
    first_token, second_token = team_tokens["reviewer-1"], team_tokens["dev-1"]
    async with (
        stateless(team_node.mcp_url, {"Authorization": f"Bearer {first_token}"}) as first,
        stateless(team_node.mcp_url, {"Authorization": f"Bearer {second_token}"}) as second,
    ):
        tour = await run_tour(README, caller(first.call_tool), caller(second.call_tool))
        read = caller(first.call_tool)
        # What the prose says happened: the result reached the assigner's inbox, the thread
        # reached consensus and completed, the paths are held.
        inbox = next(a for t, a in tour.answers if t == "bzzz_get")
        assert "task_complete" in [m["message_type"] for m in inbox["content"]["messages"]]
        agreed = [a for t, a in tour.answers if t == "bzzz_post" and a.get("stance")]
        assert [a["stance"]["stance"] for a in agreed] == ["agree"] and agreed[0]["consensus"]
        thread = await eventually(
            lambda: read("bzzz_get", {"address": f"bzzz://*/threads/{tour.known['thread_id']}"}),
            lambda got: got["content"]["thread"]["status"] == "completed",
        )
        assert thread["content"]["thread"]["consensus"], thread
        held = await read("bzzz_reserve", {"action": "list"})
        assert [r["agent_id"] for r in held["reservations"]] == ["reviewer-1"], held
    assert {"task_id", "thread_id", "message_id"} <= set(tour.known)
    assert len(tour.subscriptions) == 1


async def test_the_tour_runs_over_stdio_with_a_process_per_client(tmp_path: Path) -> None:
    # Over stdio each client starts its own `bzzz serve --stdio` on one data directory: the
    # second joins the first's embedded NATS server; each process is its client's session.
    base = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env = node_env(base, tmp_path / "data")
    with (
        (tmp_path / "first.err").open("w") as first_err,
        (tmp_path / "second.err").open("w") as second_err,
    ):
        async with (
            stdio_session(env, first_err) as first,
            stdio_session(env, second_err) as second,
        ):
            tour = await run_tour(README, caller(first.call_tool), caller(second.call_tool))
            held = await caller(first.call_tool)("bzzz_reserve", {"action": "list"})
    inbox = next(a for t, a in tour.answers if t == "bzzz_get")
    assert "task_complete" in [m["message_type"] for m in inbox["content"]["messages"]]
    assert [r["agent_id"] for r in held["reservations"]] == ["reviewer-1"], held
    assert {"task_id", "thread_id", "message_id"} <= set(tour.known)
