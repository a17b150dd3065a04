"""Every invalid argument to every tool, and to every REST route that takes JSON, answers the
seed's ErrorResponse with INVALID_PARAMETERS and ``details.field`` naming the argument at fault,
and no answer carries Python's exception text: in process, and over streamable HTTP (/mcp, in
both protocol eras) and the REST routes with bodies nested 5,000 deep."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client
from mcp_checks import ClientFactory, announce, result_text

from bzzz.api.app import build_app
from bzzz.config import load_settings
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import MAX_JSON_DEPTH

INVALID = "INVALID_PARAMETERS"
# What a caller must never read: Python's own words for a failure.
PYTHON_TEXT = (
    "Traceback",
    "recursion",
    "Recursion",
    "object has no attribute",
    "validation error for",
    "Port out of range",
    "maximum serialization depth",
    'File "',
    "ValueError",
    "TypeError",
    "KeyError",
    "pydantic",
)
LONG = "x" * 5000
OWNER = "owner-1"
BASE = "http://127.0.0.1:7331"
DEEP_BODY = 5000


def nested(levels: int) -> Any:
    """``{"a": [[[...]]]}``: an object holding arrays, ``levels`` deep in all."""
    inner: Any = []
    for _ in range(levels - 2):
        inner = [inner]
    return {"a": inner}


# Just past the bound, counted from the arguments object (level 1): the argument's own value
# is level 2, so a value of MAX_JSON_DEPTH levels puts the deepest array past it.
TOO_DEEP = nested(MAX_JSON_DEPTH)
BAD_WEBHOOKS = {
    "port-99999": "http://127.0.0.1:99999/x",
    "port-65536": "http://127.0.0.1:65536/x",
    "port-negative": "http://127.0.0.1:-1/x",
    "port-letters": "http://127.0.0.1:abc/x",
    "ipv6-unclosed": "http://[::1/x",
}


def case(tool: str, name: str, arguments: dict[str, Any], field: str) -> Any:
    """One invalid call and the field its error must name (``details.field`` starts with it)."""
    return pytest.param(tool, arguments, field, id=f"{tool.removeprefix('bzzz_')}-{name}")


ANNOUNCE = {"agent_id": "new-1", "role": "architect"}
LOOKUP = {"semantic_address": "bzzz://*"}
GET = {"address": f"bzzz://{OWNER}"}
POST = {"target_address": f"bzzz://{OWNER}", "message_type": "text", "content": {"t": "hi"}}
THREAD = {"action": "create", "topic": "design", "participants": [OWNER]}
SUBSCRIBE = {"event_types": ["agent_announcement"]}
BASES = {
    "bzzz_announce": ANNOUNCE,
    "bzzz_lookup": LOOKUP,
    "bzzz_get": GET,
    "bzzz_post": POST,
    "bzzz_thread": THREAD,
    "bzzz_subscribe": SUBSCRIBE,
}

CASES = [
    # Wrong types.
    case("bzzz_announce", "agent_id-int", ANNOUNCE | {"agent_id": 5}, "agent_id"),
    case("bzzz_announce", "role-list", ANNOUNCE | {"role": ["a"]}, "role"),
    case("bzzz_announce", "max_tasks-string", ANNOUNCE | {"max_tasks": "3"}, "max_tasks"),
    case("bzzz_lookup", "address-int", {"semantic_address": 5}, "semantic_address"),
    case(
        "bzzz_lookup",
        "availability-string",
        LOOKUP | {"filter_criteria": {"availability": "maybe"}},
        "filter_criteria",
    ),
    case(
        "bzzz_get", "include_metadata-string", GET | {"include_metadata": "yes"}, "include_metadata"
    ),
    case("bzzz_get", "as_of-list", GET | {"as_of": [1]}, "as_of"),
    case("bzzz_post", "content-string", POST | {"content": "hi"}, "content"),
    case("bzzz_thread", "participants-string", THREAD | {"participants": OWNER}, "participants"),
    case(
        "bzzz_subscribe", "event_types-string", {"event_types": "agent_announcement"}, "event_types"
    ),
    # Numbers out of range.
    case("bzzz_announce", "max_tasks-zero", ANNOUNCE | {"max_tasks": 0}, "max_tasks"),
    case("bzzz_announce", "max_tasks-huge", ANNOUNCE | {"max_tasks": 10**30}, "max_tasks"),
    case("bzzz_lookup", "limit-negative", LOOKUP | {"limit": -1}, "limit"),
    case(
        "bzzz_lookup",
        "threshold-two",
        LOOKUP | {"filter_criteria": {"performance_threshold": 2}},
        "filter_criteria",
    ),
    case("bzzz_get", "max_history-negative", GET | {"max_history": -1}, "max_history"),
    case("bzzz_get", "max_history-huge", GET | {"max_history": 10**9}, "max_history"),
    case("bzzz_get", "as_of-zero", GET | {"as_of": 0}, "as_of"),
    case("bzzz_get", "as_of-past-int64", GET | {"as_of": 2**70}, "as_of"),
    case("bzzz_get", "as_of-not-a-time", GET | {"as_of": "yesterday"}, "as_of"),
    # Over-long strings.
    case(
        "bzzz_announce",
        "specialization-long",
        ANNOUNCE | {"specialization": LONG},
        "specialization",
    ),
    case("bzzz_lookup", "address-long", {"semantic_address": LONG}, "semantic_address"),
    case("bzzz_get", "before-long", GET | {"before": LONG}, "before"),
    case("bzzz_post", "message_type-long", POST | {"message_type": LONG}, "message_type"),
    case("bzzz_thread", "topic-long", THREAD | {"topic": LONG}, "topic"),
    case(
        "bzzz_subscribe",
        "filter-long",
        SUBSCRIBE | {"filter_address": "bzzz://" + LONG},
        "filter_address",
    ),
    # Unknown enum values.
    case("bzzz_post", "priority-unknown", POST | {"priority": "critical"}, "priority"),
    case("bzzz_post", "stance-unknown", POST | {"stance": "maybe", "reply_to": "m-1"}, "stance"),
    case("bzzz_thread", "action-unknown", {"action": "explode"}, "action"),
    case("bzzz_subscribe", "action-unknown", SUBSCRIBE | {"action": "maybe"}, "action"),
    case("bzzz_subscribe", "event_type-unknown", {"event_types": ["no_such_event"]}, "event_types"),
    # Bad URLs, bad ports among them: on the tool that takes one, and on every other tool
    # (where the parameter is unknown, and the audit still records the refusal).
    *(
        case(
            "bzzz_subscribe",
            f"webhook-{name}",
            SUBSCRIBE | {"callback_webhook": url},
            "callback_webhook",
        )
        for name, url in BAD_WEBHOOKS.items()
    ),
    *(
        case(
            tool,
            "webhook-port-99999",
            base | {"callback_webhook": BAD_WEBHOOKS["port-99999"]},
            "callback_webhook",
        )
        for tool, base in BASES.items()
        if tool != "bzzz_subscribe"
    ),
    # Deep nesting, in every argument that takes an object or a list.
    case(
        "bzzz_announce",
        "capabilities-deep",
        ANNOUNCE | {"capabilities": [TOO_DEEP]},
        "capabilities",
    ),
    case("bzzz_lookup", "filter-deep", LOOKUP | {"filter_criteria": TOO_DEEP}, "filter_criteria"),
    case("bzzz_post", "content-deep", POST | {"content": TOO_DEEP}, "content"),
    case("bzzz_thread", "criteria-deep", {"action": "review", "criteria": [TOO_DEEP]}, "criteria"),
    case("bzzz_subscribe", "event_types-deep", {"event_types": [TOO_DEEP]}, "event_types"),
    case("bzzz_get", "as_of-deep", GET | {"as_of": TOO_DEEP}, "as_of"),
]


def assert_no_python_text(text: str) -> None:
    """None of Python's exception words in what the caller reads."""
    for marker in PYTHON_TEXT:
        assert marker not in text, f"{marker!r} reached the caller: {text[:400]}"


def assert_names_field(error: dict[str, Any], field: str) -> None:
    """The seed's ErrorResponse, INVALID_PARAMETERS, naming ``field``."""
    assert error["success"] is False, error
    assert error["code"] == INVALID, error
    assert isinstance(error["error"], str) and error["error"], error
    assert "timestamp" in error, error
    named = str(error["details"].get("field", ""))
    assert named.split(".")[0] == field, error


@dataclass(slots=True)
class World:
    """A node with one announced agent, its MCP client and the node's HTTP app."""

    node: Node
    client: Client
    http: httpx.AsyncClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    """One node for every call of a worker; its clients run in a task of their own (an MCP
    client's task group is entered and left in one task)."""
    data_dir = tmp_path_factory.mktemp("invalid") / "node"
    overrides = {
        "node": {"data_dir": str(data_dir)},
        "audit": {"head_every": 10**9, "head_seconds": 10**6},
    }
    settings = load_settings(environ={}, overrides=overrides)
    built: asyncio.Future[World] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        async with Node(settings, bus=InMemoryBus()) as node:
            server, _ = build_server(node)
            app = build_app(node, server, "127.0.0.1")
            transport = httpx.ASGITransport(app=app)
            async with (
                server.session_manager.run(),
                httpx.AsyncClient(transport=transport, base_url=BASE) as http,
                Client(server, mode="legacy") as client,
            ):
                await announce(client, OWNER)
                built.set_result(World(node, client, http))
                await done.wait()

    holder = asyncio.create_task(hold())
    try:
        yield await asyncio.wait_for(asyncio.shield(built), timeout=60)
    finally:
        done.set()
        await holder


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("tool", "arguments", "field"), CASES)
async def test_an_invalid_argument_gets_invalid_parameters_naming_its_field(
    world: World, tool: str, arguments: dict[str, Any], field: str
) -> None:
    result = await world.client.call_tool(tool, arguments)

    assert result.is_error is True, result
    assert result.structured_content is not None, result.content
    assert_names_field(result.structured_content, field)
    assert_no_python_text(result_text(result))


# --- over the wire: bodies nested 5,000 deep -----------------------------------------------


def deep_text(levels: int) -> str:
    """``{"a":[[[…]]]}`` as text, ``levels`` deep (too deep for Python to build or print)."""
    return '{"a":' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def legacy_session(http: httpx.AsyncClient) -> dict[str, str]:
    """The headers of a new 2025-era session on /mcp (initialize, then initialized)."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    opened = await http.post("/mcp", json=init, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    headers = ACCEPT | {
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post("/mcp", json=ready, headers=headers)).status_code == 202
    return headers


def tool_call(tool: str, arguments_text: str, modern: bool) -> str:
    """A tools/call request whose arguments are given as JSON text."""
    meta = f'"_meta":{json.dumps(META)},' if modern else ""
    return (
        f'{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{{meta}'
        f'"name":"{tool}","arguments":{arguments_text}}}}}'
    )


DEEP_ARGUMENTS = {
    "bzzz_announce": ("capabilities", '{"agent_id":"n-1","role":"r","capabilities":[%s]}'),
    "bzzz_lookup": ("filter_criteria", '{"semantic_address":"bzzz://*","filter_criteria":%s}'),
    "bzzz_get": ("as_of", '{"address":"bzzz://owner-1","as_of":%s}'),
    "bzzz_post": (
        "content",
        '{"target_address":"bzzz://owner-1","message_type":"text","content":%s}',
    ),
    "bzzz_thread": ("criteria", '{"action":"review","criteria":[%s]}'),
    "bzzz_subscribe": ("event_types", '{"event_types":[%s]}'),
}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("tool", sorted(DEEP_ARGUMENTS))
async def test_a_tool_argument_5000_deep_over_mcp_gets_the_tool_error_naming_it(
    world: World, tool: str, era: str
) -> None:
    field, template = DEEP_ARGUMENTS[tool]
    modern = era == "modern"
    if modern:
        headers = ACCEPT | {
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": tool,
        }
    else:
        headers = await legacy_session(world.http)
    body = tool_call(tool, template % deep_text(DEEP_BODY), modern)

    answer = await world.http.post("/mcp", content=body, headers=headers)

    assert answer.status_code == 200, answer.text
    assert_no_python_text(answer.text)
    message = answer.json()
    assert message["id"] == 7
    result = message["result"]
    assert result["isError"] is True
    assert_names_field(result["structuredContent"], field)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


async def test_a_deep_body_that_is_no_tool_call_gets_an_invalid_params_error(
    node: Node,
) -> None:
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    params = deep_text(DEEP_BODY)
    body = f'{{"jsonrpc":"2.0","id":"r-1","method":"resources/read","params":{params}}}'
    async with (
        server.session_manager.run(),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
    ):
        headers = await legacy_session(http)
        answer = await http.post("/mcp", content=body, headers=headers)

    assert answer.status_code == 400
    assert_no_python_text(answer.text)
    message = answer.json()
    assert message["id"] == "r-1"
    assert message["error"]["code"] == -32602
    assert message["error"]["message"].startswith("INVALID_PARAMETERS:")
    assert_names_field(message["error"]["data"], "params")


REST_BODIES = [
    pytest.param(
        "/api/v1/agents",
        "capabilities",
        '{"agent_id":"r-1","role":"r","capabilities":%s}',
        id="announce",
    ),
    pytest.param(
        f"/agents/{OWNER}/tasks",
        "data",
        '{"type":"documentation","description":"d","data":%s}',
        id="whoosh-task",
    ),
    pytest.param(
        f"/api/v1/agents/{OWNER}/tasks",
        "data",
        '{"type":"documentation","description":"d","data":%s}',
        id="rest-task",
    ),
    pytest.param(f"/agents/{OWNER}/collaborate", "topic", '{"topic":%s}', id="collaborate"),
    pytest.param("/api/v1/escalations/e-1/resolve", "reason", '{"reason":%s}', id="resolve"),
    pytest.param("/api/v1/threads/t-1/messages", "text", '{"text":%s}', id="human-post"),
    pytest.param("/api/v1/webhooks/redrive", "delivery_ids", '{"delivery_ids":%s}', id="redrive"),
    pytest.param("/api/v1/agents", "body", "%s", id="announce-whole-body"),
]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("path", "field", "template"), REST_BODIES)
async def test_a_rest_body_5000_deep_gets_invalid_parameters_naming_its_field(
    world: World, path: str, field: str, template: str
) -> None:
    body = template % ("[" * DEEP_BODY + "]" * DEEP_BODY)

    answer = await world.http.post(path, content=body, headers={"Content-Type": "application/json"})

    assert answer.status_code == 400, answer.text
    assert_no_python_text(answer.text)
    expected = "body" if field == "body" else field
    assert_names_field(answer.json(), expected)


@pytest.mark.asyncio(loop_scope="module")
async def test_content_nested_to_the_bound_is_posted_over_mcp(world: World) -> None:
    # The arguments object is level 1, content level 2: MAX_JSON_DEPTH - 1 levels of content
    # reach the bound exactly; over /mcp the request and its params add two above it.
    content = nested(MAX_JSON_DEPTH - 1)
    headers = await legacy_session(world.http)
    made = json.dumps({"agent_id": "wire-1", "role": "r"})
    await world.http.post("/mcp", content=tool_call("bzzz_announce", made, False), headers=headers)
    arguments = json.dumps(POST | {"target_address": "bzzz://wire-1", "content": content})

    posted = await world.http.post(
        "/mcp", content=tool_call("bzzz_post", arguments, False), headers=headers
    )

    assert posted.status_code == 200, posted.text
    assert posted.json()["result"].get("isError") is not True, posted.text


async def test_content_nested_to_the_bound_is_posted_in_process(connect: ClientFactory) -> None:
    async with connect() as client:
        await announce(client, OWNER)
        posted = await client.call_tool("bzzz_post", POST | {"content": nested(MAX_JSON_DEPTH - 1)})
        refused = await client.call_tool("bzzz_post", POST | {"content": nested(MAX_JSON_DEPTH)})

    assert posted.is_error is False, posted.structured_content
    assert refused.structured_content is not None
    assert_names_field(refused.structured_content, "content")
