"""Every block of every docs/*.md page runs, or is checked as what it is, against real nodes.

The kinds of block and what each one's check is are in tests/e2e/markdown.py. Per page: every
block is of a kind a test checks, the contents list names the page's sections, every settings
file loads, every `bzzz` command a page names exists, every shell line parses or runs. Then
what needs a node: client configurations connect (two nodes shared by the module: one that
never knows a credential, one whose callers hold tokens), console lines run on the data
directory of a node, the event stream's curl line hears an event, the seven tools' tour runs
with its settings file and both kinds of MCP client, the A2A client code and `bzzz a2a` lines
run (the refused one fails with the line shown), the first-node lines of access.md run on a new
data directory, the many-nodes lines run on three nats-servers run with the page's
configuration, and the compose lines admit a second node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio

from bzzz.cli import _parser
from bzzz.config import load_settings, unknown_variables
from bzzz.network import partitions
from bzzz.schemas import GetInput

from .cluster import ClusterServer, NatsCluster
from .conftest import NodeFactory
from .markdown import (
    ROOT,
    TOOLS,
    Block,
    assignments,
    blocks,
    caller,
    client_configs,
    command_lines,
    command_problem,
    kind_problems,
    named_commands,
    new_token,
    of_kind,
    on_port,
    pages,
    run_bzzz,
    run_console_line,
    run_tour,
    server_of,
    shell_lines,
    spawned,
    stateless,
    tool_calls,
    tool_names_over_http,
    tool_names_over_stdio,
)
from .support import (
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
SHARED = pytest.mark.asyncio(loop_scope="module")
PAGES = {page.name: page for page in pages()}
README = ROOT / "README.md"


def page(name: str) -> Path:
    return PAGES[name]


def each_page() -> Any:
    return pytest.mark.parametrize("page", list(PAGES.values()), ids=list(PAGES))


# --- every page --------------------------------------------------------------------------------


@each_page()
def test_every_block_is_of_a_kind_a_test_checks(page: Path) -> None:
    assert kind_problems(page) == []


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _headings(text: str) -> list[str]:
    found, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            found.append(line[3:])
    return found


@each_page()
def test_the_contents_list_names_every_section(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    [contents] = re.findall(r"^\*\*Contents:\*\* (.*)$", text, re.MULTILINE)
    listed = re.findall(r"\]\(#([^)]+)\)", contents)
    assert listed == [_anchor(h) for h in _headings(text)], page.name


def test_every_link_between_pages_leads_to_a_page_and_a_section() -> None:
    for source in [README, *PAGES.values()]:
        text = source.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", text):
            if not target and not anchor:
                continue
            path = (source.parent / target).resolve() if target else source
            assert path.is_file(), f"{source.name}: {target}"
            if anchor:
                headings = _headings(path.read_text(encoding="utf-8"))
                assert anchor in {_anchor(h) for h in headings}, f"{source.name}: {target}#{anchor}"


@each_page()
def test_every_settings_file_loads(page: Path, tmp_path: Path) -> None:
    for block in of_kind(page, "toml"):
        path = tmp_path / "bzzz.toml"
        path.write_text(block.body)
        load_settings(path, environ={"BZZZ_DATA_DIR": str(tmp_path / "d")})


def test_the_settings_file_sets_what_its_comments_say_the_variables_set(tmp_path: Path) -> None:
    """`key = value  # BZZZ_VAR` (or `# BZZZ_VAR=spelled`): the variable sets the same."""
    [block] = of_kind(page("configuration.md"), "toml")
    path = tmp_path / "bzzz.toml"
    path.write_text(block.body)
    base = {"BZZZ_DATA_DIR": str(tmp_path / "d")}
    from_file = load_settings(path, environ=base)
    section, checked = "", 0
    for line in block.body.splitlines():
        if header := re.fullmatch(r"\[(\w+)\]", line.strip()):
            section = header.group(1)
        commented = re.fullmatch(r"(\w+) = (.*?)\s+# (BZZZ_\w+)(?:=(\S+))?", line.strip())
        if commented is None:
            continue
        key, value, variable, spelled = commented.groups()
        env = base | {variable: spelled or value.strip('"')}
        assert unknown_variables(env) == [], f"{block.where}: {variable}"
        from_env = load_settings(environ=env)
        got, want = (
            getattr(getattr(from_env, section), key),
            getattr(getattr(from_file, section), key),
        )
        assert got == want, f"{block.where}: {variable} sets {section}.{key} to {got!r}"
        checked += 1
    assert checked >= 4, block.where


@each_page()
def test_every_bzzz_command_a_page_names_exists(page: Path) -> None:
    parser = _parser()
    for block in blocks(page):
        if block.kind not in ("text", "console", "bash"):
            continue
        for words in named_commands(block.body):
            problem = command_problem(words, parser)
            assert problem is None, f"{block.where}: {problem}"
        # A whole line with nothing for a shell to expand parses as the CLI reads it.
        for line in command_lines(block.body):
            if re.search(r"[$|\[\]`'\"]", line):
                continue
            try:
                parser.parse_args(line.split()[1:])
            except SystemExit:
                pytest.fail(f"{block.where}: `{line}` does not parse")


@each_page()
def test_every_tool_call_shown_as_text_parses(page: Path) -> None:
    for block in of_kind(page, "text"):
        for line in block.body.splitlines():
            match = re.match(r"^(bzzz_\w+) (\{.*\})$", line)
            if match is None:
                continue
            assert match.group(1) in TOOLS, f"{block.where}: {line}"
            arguments = json.loads(match.group(2))
            if match.group(1) == "bzzz_get":
                GetInput.model_validate(arguments)


def test_the_refusal_shown_is_a_reservation_conflict_error_response() -> None:
    [block] = [
        b for b in of_kind(page("reservations.md"), "text") if "RESERVATION_CONFLICT" in b.body
    ]
    refusal = json.loads(block.body)
    assert refusal["success"] is False and refusal["code"] == "RESERVATION_CONFLICT"
    assert set(refusal["details"]) == {"holder", "requested", "overlaps"}


def test_the_missing_key_line_shown_is_the_one_a_node_says() -> None:
    from bzzz.network.sealing import missing_key_message

    [block] = [b for b in of_kind(page("access.md"), "text") if "cannot open" in b.body]
    said = "bzzz: " + missing_key_message("KID", None).replace("none", "HELD")
    pattern = re.escape(said).replace("KID", "[0-9a-f]{16}").replace("HELD", "[0-9a-f…, ]+")
    assert re.fullmatch(pattern, " ".join(block.body.split())), block.where


# A bash block's lines are each one of: a script of the repository, a `bzzz` line whose
# settings load (the many-nodes lines, which also run below), or the event stream's curl line.
RUN_ELSEWHERE = ("curl ",)


@each_page()
def test_the_shell_lines_name_scripts_that_exist_and_settings_that_load(
    page: Path, tmp_path: Path
) -> None:
    for block in of_kind(page, "bash"):
        exported: dict[str, str] = {}
        for line in shell_lines(block):
            if line.startswith(RUN_ELSEWHERE):
                continue
            words = shlex.split(line)
            if words[:1] == ["export"]:
                exported |= assignments(words[1:])
                continue
            env = exported | assignments(words)
            if words[:1] == ["bash"]:
                script = ROOT / words[1]
                assert script.is_file() and script.stat().st_mode & 0o111, line
                continue
            assert words[0] == "bzzz", f"{block.where}: {line}"
            _parser().parse_args(words[1:])
            env |= {"BZZZ_DATA_DIR": str(tmp_path / "d")}
            assert unknown_variables(env) == [], line
            load_settings(environ=env)


def test_the_first_node_lines_admit_the_data_directorys_key_before_any_node_runs(
    tmp_path: Path,
) -> None:
    """access.md's lines, run as written on a new data directory (made under the test's
    directory): the token is stored, and `bzzz node list` shows the network closed with the
    directory's own node admitted."""
    [block] = [b for b in of_kind(page("access.md"), "bash") if "mktemp" in b.body]
    on_path = {"PATH": f"{Path(bzzz_executable()).parent}:{os.environ['PATH']}"}
    env = _base_env() | on_path | {"TMPDIR": str(tmp_path)}
    script = "\n".join(
        ["set -euo pipefail", *shell_lines(block), 'bzzz identity --json > "$TMPDIR/id.json"']
    )
    try:
        done = subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True,
            timeout=START_TIMEOUT, check=False,
        )  # fmt: skip
    finally:
        for made in tmp_path.iterdir():
            if made.is_dir():
                kill_orphans(made)
    assert done.returncode == 0, f"{block.where}: {done.stderr}"
    node_id = json.loads((tmp_path / "id.json").read_text())["node_id"]
    assert re.search(r"^network main: closed$", done.stdout, re.MULTILINE), done.stdout
    assert re.search(rf"^{node_id}\s", done.stdout, re.MULTILINE), done.stdout


# --- the shared nodes --------------------------------------------------------------------------


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def open_node(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HttpNode]:
    """A node on the default settings that never knows a credential."""
    directory = tmp_path_factory.mktemp("open")
    node = await spawned(directory, node_env(_base_env(), directory / "data"))
    try:
        yield node
    finally:
        await node.kill()
        kill_orphans(node.data_dir)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team_node(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HttpNode]:
    """A node on the default settings whose callers hold tokens; console lines run on it."""
    directory = tmp_path_factory.mktemp("team")
    node = await spawned(directory, node_env(_base_env(), directory / "data"))
    try:
        yield node
    finally:
        await node.kill()
        kill_orphans(node.data_dir)


# --- client configurations ---------------------------------------------------------------------


@SHARED
async def test_the_client_configurations_without_a_credential_connect(
    open_node: HttpNode, tmp_path: Path
) -> None:
    configs = [
        (block, server_of(json.loads(block.body)))
        for p in PAGES.values()
        for block in client_configs(p)
    ]
    open_ones = [(b, s) for b, s in configs if "headers" not in s]
    assert {b.page.name for b, _ in open_ones} == {"clients.md"}
    assert {"url" in s for _, s in open_ones} == {True, False}  # one over HTTP, one over stdio
    for block, server in open_ones:
        if "url" in server:
            found = await tool_names_over_http(on_port(server["url"], open_node.port), {})
        else:
            found = await tool_names_over_stdio(server, open_node.env, tmp_path / "stdio.err")
        assert found == TOOLS, block.where


@SHARED
async def test_the_client_configuration_with_a_token_connects_only_with_one(
    team_node: HttpNode,
) -> None:
    token = await new_token(team_node.env, "docs-config")
    [block] = client_configs(page("access.md"))
    server = server_of(json.loads(block.body))
    url = on_port(server["url"], team_node.port)
    headers = {k: v.replace("bzzz_…", token) for k, v in server["headers"].items()}
    assert await tool_names_over_http(url, headers) == TOOLS
    # Without it the node refuses the client (a token exists: credentials are required).
    async with httpx2.AsyncClient(timeout=START_TIMEOUT) as http:
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401, refused.text


# --- console lines -----------------------------------------------------------------------------


CONSOLES = ["access.md", "dashboard.md", "cli.md", "operations.md", "knowledge.md"]


@SHARED
@pytest.mark.parametrize("name", CONSOLES)
async def test_the_console_lines_run_on_a_nodes_data_directory(
    name: str, team_node: HttpNode, tmp_path: Path
) -> None:
    consoles = of_kind(page(name), "console")
    assert consoles, name
    if name == "cli.md":
        await _agent_with_work(team_node, "dev-1")
    if name == "operations.md":
        await _agent_with_work(team_node, "bob-001")  # the agent its `forget` line erases
    for block in consoles:
        for line in block.body.splitlines():
            printed = await run_console_line(line, block, team_node.env, tmp_path)
            if "token create" in line and "--json" in line:
                assert printed["token"].startswith("bzzz_"), block.where


async def _agent_with_work(node: HttpNode, agent_id: str) -> None:
    """What the page's lines read: an agent of shop (its own token) with a message and a task."""
    token = await new_token(
        node.env, f"docs-{agent_id}", "--agent", agent_id, "--project", "shop", "--role", "dev"
    )
    async with stateless(node.mcp_url, {"Authorization": f"Bearer {token}"}) as client:
        act = caller(client.call_tool)
        made = await act("bzzz_announce", {"agent_id": agent_id, "role": "dev", "project": "shop"})
        assert made["success"] is True, made
        posted = await act(
            "bzzz_post",
            {"target_address": f"bzzz://{agent_id}", "message_type": "task_assignment",
             "content": {"task_type": "chat_completion", "description": "read me"}},
        )  # fmt: skip
        assert posted["success"] is True, posted


def test_every_console_block_is_run_above() -> None:
    with_console = {name for name, p in PAGES.items() if of_kind(p, "console")}
    assert with_console == set(CONSOLES)


# --- the event stream --------------------------------------------------------------------------


@SHARED
async def test_the_event_stream_curl_line_hears_a_task_assignment(team_node: HttpNode) -> None:
    assert shutil.which("curl"), "the HTTP API page's event stream line uses curl"
    [block] = [b for b in of_kind(page("http-api.md"), "bash") if "curl" in b.body]
    [line] = shell_lines(block)
    token = await new_token(team_node.env, "docs-events")
    script = line.replace("http://127.0.0.1:7331/", f"http://127.0.0.1:{team_node.port}/")
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", script, env={**team_node.env, "TOKEN": token},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        headers = {"Authorization": f"Bearer {token}"}
        async with http_session(team_node.mcp_url, headers=headers) as session:
            # Room for a task a second: the stream may open after the first posts.
            await call(
                session,
                "bzzz_announce",
                {"agent_id": "sse-1", "role": "dev", "project": "shop", "max_tasks": 50},
            )
            heard = b""
            async with asyncio.timeout(START_TIMEOUT):
                while b"task_assignment" not in heard:
                    await call(
                        session,
                        "bzzz_post",
                        {"target_address": "bzzz://sse-1", "message_type": "task_assignment",
                         "content": {"task_type": "chat_completion", "description": "hi"}},
                    )  # fmt: skip
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1):
                            heard += await proc.stdout.read(4096)
    finally:
        proc.kill()
        await proc.wait()
    assert b"event:" in heard or b"data:" in heard, heard


# --- the A2A client code ----------------------------------------------------------------------


@SHARED
async def test_the_a2a_client_code_runs_as_written_and_assigns_a_task(team_node: HttpNode) -> None:
    [block] = of_kind(page("a2a.md"), "python")
    await _agent_with_work(team_node, "reviewer-1")
    token = await new_token(team_node.env, "docs-a2a")
    env = {k: v for k, v in team_node.env.items() if not k.startswith("BZZZ_")}
    env |= {"BZZZ_BASE": team_node.base_url, "TOKEN": token}
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
    [agent, task_id, state] = done.stdout.split()
    assert (agent, state) == ("reviewer-1", "TASK_STATE_SUBMITTED"), done.stdout
    tasks = json.loads(await run_bzzz(["tasks", "--agent", "reviewer-1", "--json"], team_node.env))
    assert task_id in {t["id"] for t in tasks["tasks"]}, tasks


@SHARED
async def test_the_a2a_add_lines_put_an_a2a_agent_on_the_network_as_shown(
    team_node: HttpNode,
) -> None:
    """The page's `$ bzzz a2a …` lines, its example URL standing for a local signed echo agent;
    `add` prints the line the page shows, with that URL."""
    from agent2agent.remote import remote_agent

    example = "https://agents.example.com/echo"
    [block] = [b for b in of_kind(page("a2a.md"), "text") if f"$ bzzz a2a add {example}" in b.body]
    lines = block.body.splitlines()
    async with remote_agent(signed=True) as remote:
        for i, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            printed = await run_bzzz(
                shlex.split(line[2:].replace(example, remote.url))[1:], team_node.env
            )
            shown = (
                lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("$") else None
            )
            if shown is not None:
                assert printed.strip() == shown.replace(example, remote.url), block.where
            if "a2a list" in line:
                assert remote.url in printed and "echo-agent" in printed, printed
    listed = await run_bzzz(["a2a", "list", "--json"], team_node.env)
    assert "echo-agent" not in listed, listed  # the last line removed it


@SHARED
async def test_the_refused_a2a_add_line_fails_with_the_line_shown(team_node: HttpNode) -> None:
    """The page's `a2a add` of a URL the SSRF rules never allow: exit code 1, the line shown on
    stderr, and nothing added."""
    [block] = [b for b in of_kind(page("a2a.md"), "text") if "is refused: host" in b.body]
    [line, said] = block.body.splitlines()
    assert line.startswith("$ bzzz a2a add "), block.where
    before = json.loads(await run_bzzz(["a2a", "list", "--json"], team_node.env))
    done = await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *shlex.split(line[2:])[1:]],
        env=team_node.env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1, f"{block.where}: {done.stdout} {done.stderr}"
    assert done.stderr.strip().splitlines()[-1] == said, f"{block.where}: {done.stderr}"
    assert json.loads(await run_bzzz(["a2a", "list", "--json"], team_node.env)) == before


def test_every_python_block_is_run() -> None:
    with_python = {name for name, p in PAGES.items() if of_kind(p, "python")}
    assert with_python == {"a2a.md"}


# --- the seven tools' tour ---------------------------------------------------------------------


def test_the_tour_calls_every_tool_and_every_thread_action() -> None:
    calls = [
        (b.info[1], json.loads(re.sub(r'"<\w+>"', '""', b.body)))
        for b in tool_calls(page("tools.md"))
    ]
    assert {tool for tool, _ in calls} == TOOLS
    actions = {args["action"] for tool, args in calls if tool == "bzzz_thread"}
    assert actions == {
        "create", "join", "leave", "list", "summarize", "pause", "resume", "resolve", "close",
        "review",
    }  # fmt: skip


def test_the_partition_mapping_is_the_one_nodes_probe_for() -> None:
    [block] = [b for b in of_kind(page("many-nodes.md"), "text") if b.body.startswith("mappings {")]
    assert block.body.strip() == "\n".join(partitions.mapping_config(3))


def test_the_tools_page_lists_the_message_types_the_node_acts_on() -> None:
    from bzzz.schemas import ACTED_ON_TYPES

    text = page("tools.md").read_text()
    for kind in ACTED_ON_TYPES:
        assert f"`{kind}`" in text, kind


@pytest.fixture
async def tour_node(tmp_path: Path, clean_env: dict[str, str]) -> AsyncIterator[HttpNode]:
    """A node run with the tools page's settings file."""
    [toml] = of_kind(page("tools.md"), "toml")
    config = tmp_path / "bzzz.toml"
    config.write_text(toml.body)
    node = await spawned(tmp_path, node_env(clean_env, tmp_path / "data", BZZZ_CONFIG=str(config)))
    try:
        yield node
    finally:
        await node.kill()
        kill_orphans(node.data_dir)


async def _left_on(node: HttpNode, subscriptions: list[str]) -> list[tuple[str, str | None]]:
    """The tour's subscriptions the node still has: (subscriber, webhook) of each."""
    shown = json.loads(await run_bzzz(["subscriptions", "list", "--json"], node.env))
    return [
        (s["subscriber_id"], s["callback_webhook"])
        for s in shown["subscriptions"]
        if s["subscription_id"] in subscriptions
    ]


async def test_the_tools_tour_runs_with_the_stateless_default_client(tour_node: HttpNode) -> None:
    async with (
        stateless(tour_node.mcp_url, {"X-Bzzz-Session": "tour-first"}) as first,
        stateless(tour_node.mcp_url, {"X-Bzzz-Session": "tour-second"}) as second,
    ):
        tour = await run_tour(page("tools.md"), caller(first.call_tool), caller(second.call_tool))
    assert set(tour.known) == {"task_id", "thread_id", "message_id", "oldest", "subscription_id"}
    # It subscribed twice and leaves no webhook behind: the second client unsubscribed it. A
    # client without a session leaves its plain subscription to its agent's lease.
    assert len(tour.subscriptions) == 2
    await eventually(
        lambda: _left_on(tour_node, tour.subscriptions),
        lambda left: left == [("reviewer-001", None)],
    )


async def test_the_tools_tour_runs_with_the_legacy_handshake_and_its_rule_fires(
    tour_node: HttpNode,
) -> None:
    async with http_session(tour_node.mcp_url) as first, http_session(tour_node.mcp_url) as second:
        tour = await run_tour(page("tools.md"), caller(first.call_tool), caller(second.call_tool))
        escalations = json.loads(await run_bzzz(["escalations", "--json"], tour_node.env))
    assert set(tour.known) == {"task_id", "thread_id", "message_id", "oldest", "subscription_id"}
    # Its sessions' subscriptions ended with them; the webhook was unsubscribed.
    await eventually(lambda: _left_on(tour_node, tour.subscriptions), lambda left: left == [])
    # The rule of the page's settings file fired, and `resolve` resolved it.
    [escalation] = escalations["escalations"]
    assert escalation["rule"] == "Any Disagreement" and escalation["resolved"] is True
    await _replay_is_as_shown(tour_node, tour.known["thread_id"])


async def _replay_is_as_shown(node: HttpNode, thread_id: str) -> None:
    """`bzzz thread replay` of the tour's thread prints the columns and fields threads.md shows."""
    [block] = [b for b in of_kind(page("threads.md"), "text") if "$ bzzz thread replay" in b.body]
    lines = block.body.splitlines()
    table = await run_bzzz(["thread", "replay", thread_id], node.env)
    # The table's columns are the ones shown (the page draws it without the box).
    [header] = [line for line in table.splitlines() if "┃" in line]
    columns = [c.strip() for c in header.strip("┃ ").split("┃")]
    assert columns == re.split(r"\s{2,}", lines[1].strip()), (lines[1], header)
    shown = json.loads(re.sub(r", …\]", "]", lines[-1]))
    replayed = json.loads(await run_bzzz(["thread", "replay", thread_id, "--json"], node.env))
    assert set(replayed) >= set(shown) and replayed["thread_id"] == thread_id
    assert replayed["envelopes"] and all(
        set(e) == set(shown["envelopes"][0]) and e["verified"] for e in replayed["envelopes"]
    ), replayed


@SHARED
async def test_resolve_on_the_default_settings_has_nothing_to_resolve_as_the_page_says(
    open_node: HttpNode,
) -> None:
    """Why the README's tour stops short of `resolve`: the default rules do not fire on one
    disagreement, and the page says what `resolve` answers then."""
    node = open_node  # the default settings
    text = page("tools.md").read_text()
    [said] = re.findall(r'answers\n?`(\w+)` \("([^"]+)"\)', text)
    async with http_session(node.mcp_url) as first, http_session(node.mcp_url) as second:
        await call(first, "bzzz_announce", {"agent_id": "r-1", "role": "reviewer"})
        await call(second, "bzzz_announce", {"agent_id": "a-1", "role": "architect"})
        made = await call(
            first, "bzzz_thread", {"action": "create", "topic": "t", "participants": ["a-1"]}
        )
        thread = made["thread_id"]
        decided = await call(
            first,
            "bzzz_post",
            {"thread_id": thread, "message_type": "decision", "content": {"text": "d"}},
        )
        await call(
            second,
            "bzzz_post",
            {
                "thread_id": thread,
                "message_type": "text",
                "content": {"text": "no"},
                "reply_to": decided["message_id"],
                "stance": "disagree",
            },
        )
        result = await first.call_tool(
            "bzzz_thread", {"action": "resolve", "thread_id": thread, "reason": "r"}
        )
    body = result.structured_content
    assert body is not None and body["code"] == said[0] and said[1] in body["error"], body


def _many_nodes_block() -> Block:
    [block] = [b for b in of_kind(page("many-nodes.md"), "bash") if "bzzz node admit" in b.body]
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


def _cluster_config_block() -> Block:
    [block] = [
        b for b in of_kind(page("many-nodes.md"), "text") if b.body.startswith("server_name: n1\n")
    ]
    return block


class ReadmeCluster(NatsCluster):
    """Three servers, each run with the many-nodes page's configuration of ``n1``, on loopback.

    Server k's is n1's with machines 1 and k swapped (its name, and its routes to the other
    two), as the page says of ``n2`` and ``n3``. Loopback has one address, so each machine's
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
        assert not unplaced, f"{_cluster_config_block().where}: {unplaced}"
        return text


@pytest.fixture
async def secured_cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """The page's secured 3-server cluster, its servers run with its configuration block."""
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
        for line in shell_lines(_many_nodes_block()):
            words = shlex.split(_on_loopback(line, secured_cluster, home, public_key))
            if words[:1] == ["export"]:
                exported |= assignments(words[1:])
                continue
            env = clean_env | {"PYTHONUNBUFFERED": "1"} | exported | assignments(words)
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
            printed = await run_bzzz(words[1:], env)
            if words[1] == "identity":
                [public_key] = re.findall(r"^public_key\s+(\S+)$", printed, re.MULTILINE)
        a, b = nodes
        listed = json.loads(await run_bzzz(["node", "list", "--json"], a.env))
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
    [block] = [
        b
        for b in of_kind(page("operations.md"), "text")
        if "docker compose" in b.body and "node admit" in b.body
    ]
    lines = [line for line in block.body.splitlines() if re.search(r"bzzz (identity|node)", line)]
    assert len(lines) == 2, f"{block.where}: {lines}"
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
    assert shutil.which("jq"), "the compose lines pipe `bzzz identity --json` into jq"
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
        cwd=ROOT,
        env=shell_env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(await run_bzzz(["identity", "--json"], b.env))
    listed = json.loads(await run_bzzz(["node", "list", "--json"], a.env))
    assert shown["public_key"] in {n["public_key"] for n in listed["nodes"]}
    await _post_from_b_reaches_a(a, b)
