"""Every entry point holds to the table of scopes in docs/access.md.

The MCP tools come from the server (``tools/list``, their actions from the input models), the
HTTP routes from the Starlette app, the CLI commands from its parser: one without a row, or a
row without an entry point, fails. For each row a principal of the scope below the named one
is refused (``PERMISSION_DENIED`` / 403; no credential: 401) and one of the named scope is not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.routing import Route
from ulid import ULID

from bzzz.access.service import admin_principal
from bzzz.api.app import build_app
from bzzz.cli import _parser
from bzzz.config import Settings
from bzzz.mcp.server import BzzzMCP, build_server
from bzzz.network.identity import KEY_FILE
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import Scope
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import SubscribeInput, ThreadInput

TABLE = Path(__file__).resolve().parents[2] / "docs" / "access.md"
ROW = re.compile(r"^\| `([^`]+)` \| (none|read|write|admin|local) \|")
SCOPES = ["none", "read", "write", "admin"]
BASE = "http://127.0.0.1:7331"
WITHIN = 30.0
ADMIN_SECRET = "scope-test-admin-secret"
# A tool whose ``action`` picks what it does: its actions, and the one its bare row stands for.
ACTION_MODELS: dict[str, tuple[Any, str | None]] = {
    "bzzz_thread": (ThreadInput, None),
    "bzzz_subscribe": (SubscribeInput, "subscribe"),
    "bzzz_reserve": (ReserveInput, "reserve"),
}
# Rows for a parameter that needs more than its tool's scope.
PARAMETER_ROWS = {"bzzz_subscribe callback_webhook"}
# The streamable HTTP endpoint is one route for every method it serves.
MCP_METHODS = ("GET", "POST", "DELETE")


def scope_table() -> dict[str, str]:
    """docs/access.md's table: entry point -> scope."""
    rows: dict[str, str] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        found = ROW.match(line)
        if found:
            key, scope = found.groups()
            assert key not in rows, f"docs/access.md names {key!r} twice"
            rows[key] = scope
    assert rows, "docs/access.md has no table of scopes"
    return rows


def route_keys(app: Starlette) -> set[str]:
    """``METHOD /path`` of every route of the app."""
    keys = set()
    for route in app.routes:
        assert isinstance(route, Route), f"a route the test does not know: {route!r}"
        methods = route.methods or set(MCP_METHODS)
        keys |= {f"{method} {route.path}" for method in methods if method != "HEAD"}
    return keys


def tool_keys(tools: list[Any]) -> set[str]:
    """The rows the tools need: one per tool, or per action of a tool with actions."""
    keys = set()
    for tool in tools:
        if "action" not in tool.input_schema.get("properties", {}):
            keys.add(tool.name)
            continue
        assert tool.name in ACTION_MODELS, f"{tool.name} has actions the test does not know"
        model, default = ACTION_MODELS[tool.name]
        for action in get_args(model.model_fields["action"].annotation):
            keys.add(tool.name if action == default else f"{tool.name} action={action}")
    return keys | PARAMETER_ROWS


def command_keys(parser: argparse.ArgumentParser, prefix: str = "bzzz") -> set[str]:
    """``bzzz <command> …`` of every command the parser runs."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return {prefix}
    keys = set() if subparsers[0].required or prefix == "bzzz" else {prefix}
    for name, child in subparsers[0].choices.items():
        keys |= command_keys(child, f"{prefix} {name}")
    return keys


# --- the node, its tokens and its clients ------------------------------------------------------


@dataclass
class Served:
    """A node that requires credentials, its app, a bearer secret per scope."""

    node: Node
    server: BzzzMCP
    app: Starlette
    secrets: dict[str, str | None]

    def headers(self, scope: str) -> dict[str, str]:
        secret = self.secrets[scope]
        return {"Authorization": f"Bearer {secret}"} if secret else {}


@pytest.fixture
async def served(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Served]:
    settings.auth.required = True
    settings.auth.metrics_public = False
    settings.node.auth_tokens = [ADMIN_SECRET]
    async with Node(settings, bus=memory_bus) as node:
        by = admin_principal(ADMIN_SECRET)
        secrets: dict[str, str | None] = {"none": None}
        for scope in (Scope.READ, Scope.WRITE, Scope.ADMIN):
            _, secret = await node.access.create_token(
                by, f"{scope.label} token", ["*"], ["*", "human"], scope, None
            )
            secrets[scope.label] = secret
        server, _ = build_server(node)
        yield Served(node, server, build_app(node, server, "127.0.0.1"), secrets)


def serving(served: Served) -> contextlib.AbstractAsyncContextManager[None]:
    """The MCP session manager, which the app's lifespan runs (entered in the test's task:
    it holds an anyio task group)."""
    return served.server.session_manager.run()


@contextlib.asynccontextmanager
async def mcp_client(served: Served, scope: str) -> AsyncIterator[Client]:
    """The official default client (2026-07-28) over streamable HTTP, with a scope's token."""
    transport = httpx2.ASGITransport(app=served.app)
    http = httpx2.AsyncClient(transport=transport, headers=served.headers(scope), timeout=WITHIN)
    async with http, Client(streamable_http_client(f"{BASE}/mcp", http_client=http)) as client:
        yield client


# --- how each entry point is called -----------------------------------------------------------

# Arguments that get a tool past its validation to its scope check.
THREAD_ARGUMENTS: dict[str, dict[str, Any]] = {
    "create": {"participants": ["nobody"], "topic": "t"},
    "join": {"thread_id": "thread-nope"},
    "leave": {"thread_id": "thread-nope"},
    "list": {},
    "summarize": {"thread_id": "thread-nope"},
    "pause": {"thread_id": "thread-nope", "reason": "r"},
    "resume": {"thread_id": "thread-nope"},
    "resolve": {"thread_id": "thread-nope", "reason": "r"},
    "close": {"thread_id": "thread-nope", "reason": "r"},
    "review": {"roles": ["reviewer"], "topic": "t"},
}


def tool_call(key: str) -> tuple[str, dict[str, Any]]:
    """The tool and arguments of an MCP row."""
    name, _, variant = key.partition(" ")
    if name == "bzzz_thread":
        action = variant.removeprefix("action=")
        return name, {"action": action, **THREAD_ARGUMENTS[action]}
    calls: dict[str, dict[str, Any]] = {
        "bzzz_announce": {"agent_id": f"agent-{ULID()}".lower(), "role": "developer"},
        "bzzz_lookup": {"semantic_address": "bzzz://*"},
        "bzzz_get": {"address": "bzzz://nobody"},
        "bzzz_post": {
            "message_type": "text",
            "content": {"text": "x"},
            "target_address": "bzzz://nobody",
        },
        "bzzz_subscribe": {"event_types": ["agent_announcement"]},
        "bzzz_subscribe callback_webhook": {
            "event_types": ["agent_announcement"],
            "callback_webhook": "http://127.0.0.1:9/hook",
        },
        "bzzz_reserve": {"paths": ["src/**"]},
        "bzzz_reserve action=release": {"action": "release"},
        "bzzz_reserve action=renew": {"action": "renew"},
        "bzzz_reserve action=list": {"action": "list"},
        "bzzz_subscribe action=unsubscribe": {
            "action": "unsubscribe",
            "subscription_id": f"sub-{ULID()}",
        },
    }
    return name, calls[key]


async def tool_refused(served: Served, key: str, scope: str) -> bool:
    """Whether the tool of ``key`` refuses a principal of ``scope`` (no credential: 401)."""
    name, arguments = tool_call(key)
    if scope == "none":
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}  # fmt: skip
        status = await http_status(served, "none", "POST", "/mcp", json=body)
        return status in (401, 403)
    async with mcp_client(served, scope) as client, asyncio.timeout(WITHIN):
        result = await client.call_tool(name, arguments)
    content = result.structured_content or {}
    return bool(result.is_error) and content.get("code") == "PERMISSION_DENIED"


# What each HTTP route is sent: a path with its parameters, and a query or a body.
HTTP_CALLS: dict[str, dict[str, Any]] = {
    "POST /agents/{agent_id}/tasks": {"json": {"type": "documentation", "description": "d"}},
    "POST /agents/{agent_id}/collaborate": {"json": {"topic": "t"}},
    "POST /api/v1/agents/{agent_id}/tasks": {"json": {"type": "documentation", "description": "d"}},
    "POST /api/v1/agents/{agent_id}/collaborate": {"json": {"topic": "t"}},
    "POST /api/v1/agents": {"json": {"role": "developer"}},
    "POST /api/v1/agents/{agent_id}/inbox/read": {"json": {"message_ids": ["msg-nope"]}},
    "POST /api/v1/escalations/{escalation_id}/resolve": {"json": {"reason": "r"}},
    "POST /api/v1/escalations/{escalation_id}/ack": {"json": {}},
    "POST /api/v1/knowledge/{fact_id}/agree": {"json": {}},
    "GET /api/v1/knowledge": {"params": {"project": "p1", "q": "anything"}},
    "GET /api/v1/map/edge": {"params": {"a": "nobody", "b": "someone"}},
    "POST /api/v1/webhooks/redrive": {"json": {"delivery_ids": [1]}},
    "POST /api/v1/threads/{thread_id}/messages": {"json": {"text": "hello"}},
    "GET /api/v1/content": {"params": {"address": "bzzz://nobody"}},
    "POST /api/v1/reservations/check": {"json": {"agent": "nobody", "paths": ["a"]}},
    "GET /api/v1/events": {"params": {"max_events": "1"}},
    "POST /mcp": {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}},
}
PATH_VALUES = {
    "{agent_id}": "nobody",
    "{thread_id}": "thread-nope",
    "{escalation_id}": "esc-nope",
    "{name}": "app.js",
    "{fact_id}": "fact-nope",
    "{action}": "ack",
}


async def http_status(served: Served, scope: str, method: str, path: str, **send: Any) -> int:
    transport = httpx2.ASGITransport(app=served.app)
    async with httpx2.AsyncClient(transport=transport, base_url=BASE, timeout=WITHIN) as http:
        async with asyncio.timeout(WITHIN):
            headers = served.headers(scope) | {"Accept": "application/json, text/event-stream"}
            response = await http.request(method, path, headers=headers, **send)
    return response.status_code


async def route_refused(served: Served, key: str, scope: str) -> bool:
    """Whether the route of ``key`` refuses a principal of ``scope`` (401 or 403)."""
    method, path = key.split(" ", 1)
    send = dict(HTTP_CALLS.get(key, {}))
    if key == "POST /api/v1/agents":
        send["json"] = send["json"] | {"agent_id": f"agent-{ULID()}".lower()}
    for name, value in PATH_VALUES.items():
        path = path.replace(name, value)
    return await http_status(served, scope, method, path, **send) in (401, 403)


# --- the tests ---------------------------------------------------------------------------------


async def test_every_entry_point_has_a_row_and_every_row_an_entry_point(served: Served) -> None:
    async with serving(served), mcp_client(served, "read") as client:
        tools = (await client.list_tools()).tools
    entry_points = tool_keys(tools) | route_keys(served.app) | command_keys(_parser())
    table = scope_table()

    assert sorted(entry_points - set(table)) == [], "entry points without a row in docs/access.md"
    assert sorted(set(table) - entry_points) == [], "rows of docs/access.md without an entry point"


def checks(served: Served) -> dict[str, Callable[[str, str], Awaitable[bool]]]:
    """How a row is tried, by kind: a tool, a route."""

    async def tool(key: str, scope: str) -> bool:
        return await tool_refused(served, key, scope)

    async def route(key: str, scope: str) -> bool:
        return await route_refused(served, key, scope)

    return {"tool": tool, "route": route}


async def test_a_lower_scope_is_refused_and_the_named_one_is_not(served: Served) -> None:
    table = scope_table()
    try_ = checks(served)
    wrong: list[str] = []
    async with serving(served):
        for key, scope in sorted(table.items()):
            if scope == "local":
                continue
            kind = "tool" if key.startswith("bzzz_") else "route"
            if scope != "none":
                lower = SCOPES[SCOPES.index(scope) - 1]
                if not await try_[kind](key, lower):
                    wrong.append(f"{key}: '{lower}' was not refused")
            if await try_[kind](key, scope):
                wrong.append(f"{key}: '{scope}' was refused")

    assert wrong == []


async def test_a_refused_webhook_leaves_no_subscription(served: Served) -> None:
    async with serving(served):
        refused = await tool_refused(served, "bzzz_subscribe callback_webhook", "read")

    assert refused
    assert [s.callback_webhook for s in await served.node.subscriptions.subscriptions()] == []


def test_the_cli_acts_as_the_owner_of_the_data_directory(served: Served) -> None:
    """The CLI has no token: what keeps others out of its commands is the data directory."""
    table = scope_table()
    data_dir = served.node.settings.node.data_dir.expanduser()

    commands = {key: scope for key, scope in table.items() if key.startswith("bzzz ")}
    assert commands and set(commands.values()) == {"local"}
    assert stat.S_IMODE(data_dir.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE((data_dir / KEY_FILE).stat().st_mode) & 0o077 == 0
