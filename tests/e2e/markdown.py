"""The fenced blocks of README.md and docs/*.md, and the checks every page's blocks share.

A block's kind is its info string's first word; each kind is checked one way:

- ```json <tool> [second]```: one call of a tour, run in order by two MCP clients;
- ```json```: an MCP client configuration, given to the real client (stdio or HTTP);
- ```json hosted``` / ```toml hosted```: the hosted-agent examples (tests/llm runs them);
- ```toml```: a settings file, loaded by the settings loader;
- ```console```: `$ bzzz …` lines, run against a node's data directory;
- ```bash```: shell lines: scripts that exist, `bzzz` lines that parse and whose settings load,
  or lines a page's own test runs (a cluster's, a team's, a client's);
- ```python```: run as it stands against a spawned node;
- ```text```: pictures, sample output, and commands for machines a test cannot reach (docker,
  systemd: tests/test_deploy.py checks their files); every `bzzz …` command a text block names
  must exist in the CLI's parser, and some run or are compared with what the code says: the
  cluster configuration, the partition mapping, the compose lines, the `bzzz a2a` lines, the
  missing-key line, the reservation refusal, the `bzzz_get` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shlex
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from .support import CALL_TIMEOUT, START_TIMEOUT, HttpNode, bzzz_executable, http_session

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
KINDS = {"json", "toml", "console", "bash", "text", "python"}
TOOLS = {
    "bzzz_announce",
    "bzzz_lookup",
    "bzzz_get",
    "bzzz_post",
    "bzzz_thread",
    "bzzz_subscribe",
    "bzzz_reserve",
}
# ```json hosted``` and ```toml hosted```: the hosted-agent examples, which tests/llm runs.
HOSTED = "hosted"


def pages() -> list[Path]:
    """Every docs page."""
    return sorted(DOCS.glob("*.md"))


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced block: its page, its info words, its text and the line it starts on."""

    page: Path
    info: list[str]
    body: str
    line: int

    @property
    def kind(self) -> str:
        return self.info[0] if self.info else ""

    @property
    def where(self) -> str:
        """page:line, for a failure's message."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page (indented ones, in lists, included)."""
    found = []
    lines = page.read_text(encoding="utf-8").splitlines()
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
        found.append(Block(page, opening.group(2).split(), "\n".join(body), start))
        i += 1
    return found


def of_kind(page: Path, kind: str) -> list[Block]:
    return [b for b in blocks(page) if b.kind == kind]


def tool_calls(page: Path) -> list[Block]:
    """The page's tour: its ```json <tool> [second]``` blocks, in order."""
    return [b for b in of_kind(page, "json") if len(b.info) > 1 and b.info[1] != HOSTED]


def client_configs(page: Path) -> list[Block]:
    """The page's MCP client configurations (```json``` with an ``mcpServers`` object)."""
    return [b for b in of_kind(page, "json") if len(b.info) == 1]


def kind_problems(page: Path) -> list[str]:
    """Blocks of a kind no test checks, or tour blocks without their label."""
    problems = []
    lines = page.read_text(encoding="utf-8").splitlines()
    for block in blocks(page):
        if block.kind not in KINDS:
            problems.append(f"{block.where}: unchecked block {block.info}")
        elif block.info[1:] == [HOSTED] and block.kind in ("json", "toml"):
            continue
        elif block.kind == "json" and len(block.info) > 1:
            if block.info[1] not in TOOLS or block.info[2:] not in ([], ["second"]):
                problems.append(f"{block.where}: {block.info}")
                continue
            # What the info string says (GitHub does not show it), the line above says.
            who = "second" if block.info[2:] == ["second"] else "first"
            if lines[block.line - 2].strip() != f"*`{block.info[1]}`, {who} client:*":
                problems.append(f"{block.where}: the label above says another tool or client")
        elif block.kind != "json" and len(block.info) > 1:
            problems.append(f"{block.where}: unchecked block {block.info}")
    return problems


# --- shell lines -------------------------------------------------------------------------------


def shell_lines(block: Block) -> list[str]:
    """The block's commands: continuations joined, comments and blank lines dropped."""
    joined = block.body.replace("\\\n", " ")
    return [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip()]


def assignments(words: list[str]) -> dict[str, str]:
    """Take the leading NAME=value words off ``words``."""
    found = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        found[name] = value
    return found


# --- commands named in text -------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers here, and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _subcommands_required(parser: argparse.ArgumentParser) -> bool:
    return any(
        isinstance(action, argparse._SubParsersAction) and action.required
        for action in parser._actions
    )


def named_commands(text: str) -> list[list[str]]:
    """The `bzzz …` commands a text names: at a line's start (after `$ `, if any), or run in a
    container or from an install."""
    found = []
    # At a line's start, or run in a container (`exec [-T] NAME bzzz`) or from an install
    # (`…/bin/bzzz`).
    starts = re.compile(r"(?:^\s*(?:\$ )?|\bexec (?:-T )?\S+ |/bin/)bzzz (.*)$")
    for line in text.splitlines():
        match = starts.search(line)
        if match is None:
            continue
        words = []
        for word in match.group(1).split(" #")[0].split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
                break
            words.append(word)
        found.append(words)
    return found


def command_lines(text: str) -> list[str]:
    """The whole of each `bzzz …` command a text names, from `bzzz` on (comments dropped)."""
    starts = re.compile(r"(?:^\s*(?:\$ )?|\bexec (?:-T )?\S+ |/bin/)(bzzz .*)$")
    return [m.group(1).split(" #")[0].strip() for m in map(starts.search, text.splitlines()) if m]


def command_problem(words: list[str], parser: argparse.ArgumentParser) -> str | None:
    """Why ``bzzz WORDS…`` names no command of the parser (None: it does)."""
    current = parser
    for depth, word in enumerate(words):
        choices = _subcommands(current)
        if not choices:
            return None  # the rest are the command's own arguments
        if word not in choices:
            return f"`bzzz {' '.join(words[: depth + 1])}` is no command"
        current = choices[word]
    if _subcommands(current) and _subcommands_required(current):
        return f"`bzzz {' '.join(words)}` needs a subcommand"
    return None


# --- the tours ---------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"<(task_id|thread_id|message_id|oldest|subscription_id)>")
Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def _fill(text: str, known: dict[str, str], block: Block) -> dict[str, Any]:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in known, f"{block.where}: <{name}> before any answer gave it"
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
    """What a tour's answers gave: the ids later blocks name, the subscriptions it made, and
    each call's answer in order."""

    known: dict[str, str]
    subscriptions: list[str]
    answers: list[tuple[str, dict[str, Any]]]


async def run_tour(page: Path, first: Call, second: Call) -> Tour:
    """Run a page's tour, each block by the client its label names; every call must succeed."""
    known: dict[str, str] = {}
    subscriptions: list[str] = []
    answers = []
    for block in tool_calls(page):
        tool = block.info[1]
        arguments = _fill(block.body, known, block)
        result = await (second if block.info[2:] == ["second"] else first)(tool, arguments)
        assert result.get("success") is True, f"{block.where}: {tool} -> {result}"
        _learn(tool, result, known)
        answers.append((tool, result))
        if tool == "bzzz_subscribe" and arguments.get("action", "subscribe") == "subscribe":
            subscriptions.append(result["subscription_id"])
    return Tour(known, subscriptions, answers)


def caller(call_tool: Callable[..., Awaitable[Any]]) -> Call:
    """A tool call through an MCP client, bounded; its structured answer."""

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with anyio.fail_after(CALL_TIMEOUT):
            result = await call_tool(tool, arguments)
        body: dict[str, Any] = result.structured_content
        return body

    return call


@contextlib.asynccontextmanager
async def stateless(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    """The SDK's default client (2026-07-28, no handshake), sending ``headers``."""
    http = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


# --- commands and client configurations --------------------------------------------------------


async def run_bzzz(args: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    """Run `bzzz ARGS…` to completion (bounded); its stdout, failing on an error."""
    done = await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"bzzz {' '.join(args)}: {done.stderr}"
    return done.stdout


async def run_console_line(line: str, block: Block, env: dict[str, str], cwd: Path) -> Any:
    """One `$ bzzz …` line of a console block, run in ``cwd``: it succeeds and prints (or
    writes the file its -o names); --json prints JSON."""
    assert line.startswith("$ bzzz "), f"{block.where}: {line}"
    argv = shlex.split(line.removeprefix("$ "))
    printed = await run_bzzz(argv[1:], env, cwd)
    if "-o" in argv:
        written = cwd / argv[argv.index("-o") + 1]
        assert written.read_text().strip(), f"{block.where}: {line} wrote nothing"
        return printed
    assert printed.strip(), f"{block.where}: {line} printed nothing"
    return json.loads(printed) if "--json" in argv else printed


async def new_token(env: dict[str, str], name: str, *options: str) -> str:
    """A network token made with `bzzz token create` (default: project shop)."""
    made = json.loads(
        await run_bzzz(
            ["token", "create", name, *(options or ("--project", "shop")), "--json"], env
        )
    )
    token: str = made["token"]
    return token


async def tool_names_over_http(url: str, headers: dict[str, str]) -> set[str]:
    """The tools a legacy MCP session over streamable HTTP lists, with these headers."""
    async with http_session(url, headers=headers) as session:
        tools = await session.list_tools()
    return {tool.name for tool in tools.tools}


async def tool_names_over_stdio(server: dict[str, Any], env: dict[str, str], log: Path) -> set[str]:
    """The tools a configuration's stdio server lists (the tests' `bzzz` for its command)."""
    assert server["command"].endswith("/.venv/bin/bzzz"), server
    params = StdioServerParameters(command=bzzz_executable(), args=server["args"], env=env)
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(START_TIMEOUT):
                await session.initialize()
                tools = await session.list_tools()
    return {tool.name for tool in tools.tools}


def server_of(config: dict[str, Any]) -> dict[str, Any]:
    """The one server of an ``mcpServers`` configuration."""
    [server] = config["mcpServers"].values()
    return dict(server)


def on_port(url: str, port: int) -> str:
    """A page's URL of the default node, on the test node's port instead."""
    assert url.startswith("http://127.0.0.1:7331/"), url
    return url.replace(":7331/", f":{port}/")


async def spawned(directory: Path, env: dict[str, str], attempts: int = 3) -> HttpNode:
    """A started node in ``directory`` (data in ``data``): a port another process took between
    its pick and the node's bind (other test runs share the machine) is picked again."""
    for attempt in range(attempts):
        node = HttpNode(directory / "data", env, directory / "logs")
        try:
            await node.start()
        except pytest.fail.Exception:
            if attempt == attempts - 1 or "Address already in use" not in node.stderr_tail():
                raise
            continue
        return node
    raise AssertionError("unreachable")
