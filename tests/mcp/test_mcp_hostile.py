"""Every tool answers missing, wrong-typed, oversized and hostile parameters with the reference's
ErrorResponse (isError, a code from its list, no internals) and leaves the node's state as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client
from mcp_checks import (
    ClientFactory,
    announce,
    assert_error_response,
    call_ok,
    table_counts,
)

from bzzz.config import load_settings
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

BIG = "a" * 100_000
LONG_ADDRESS = "bzzz://" + "a" * 5000
SQL = "x'; DROP TABLE agents; --"
TRAVERSAL = "../../etc/passwd"
NUL = "evil\x00agent"
RTL = "\u202eadmin"
MANY = [f"item-{i}" for i in range(10_000)]
OVER_256_KB = {"text": "x" * (300 * 1024)}

OWNER = "owner-1"
PEER = "peer-1"

INVALID = "INVALID_PARAMETERS"
NO_AGENT = "AGENT_NOT_FOUND"
NO_THREAD = "THREAD_NOT_FOUND"


def case(
    tool: str, name: str, arguments: dict[str, Any], code: str = INVALID, bug: str | None = None
) -> Any:
    """One hostile call and the error code it must get (``bug``: a known, strict xfail)."""
    marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
    return pytest.param(
        tool, arguments, code, id=f"{tool.removeprefix('bzzz_')}-{name}", marks=marks
    )


def announce_with(**changes: Any) -> dict[str, Any]:
    """Valid announce arguments with some replaced (None removes one)."""
    arguments: dict[str, Any] = {"agent_id": "new-1", "role": "architect"} | changes
    return {k: v for k, v in arguments.items() if v is not None}


def post_with(**changes: Any) -> dict[str, Any]:
    """Valid post arguments with some replaced (None removes one)."""
    base = {"target_address": f"bzzz://{PEER}", "message_type": "text", "content": {"t": "hi"}}
    return {k: v for k, v in (base | changes).items() if v is not None}


def create_with(**changes: Any) -> dict[str, Any]:
    """Valid thread-create arguments with some replaced (None removes one)."""
    base = {"action": "create", "topic": "design", "participants": [PEER]}
    return {k: v for k, v in (base | changes).items() if v is not None}


HOSTILE_ADDRESSES = {
    "100kb": BIG,
    "5000-chars": LONG_ADDRESS,
    "sql": f"bzzz://{SQL}",
    "traversal": TRAVERSAL,
    "path-traversal": f"bzzz://{OWNER}/{TRAVERSAL}",
    "nul": f"bzzz://{NUL}",
    "newline": f"bzzz://{OWNER}\n:admin@*:*",
    "crlf-path": f"bzzz://{OWNER}/inbox\r\nX-Injected: 1",
    "rtl": f"bzzz://{RTL}",
    "javascript": "javascript:alert(1)",
    "file": "file:///etc/passwd",
    "two-ats": "bzzz://a@b@c",
    "three-colons": "bzzz://a:b:c@d",
    "empty": "",
    "blank": "   ",
}

ANNOUNCE_CASES = [
    case("bzzz_announce", "no-params", {}),
    case("bzzz_announce", "missing-agent_id", announce_with(agent_id=None)),
    case("bzzz_announce", "missing-role", announce_with(role=None)),
    case("bzzz_announce", "agent_id-int", announce_with(agent_id=123)),
    case("bzzz_announce", "role-int", announce_with(role=7)),
    case("bzzz_announce", "capabilities-string", announce_with(capabilities="system_design")),
    case("bzzz_announce", "capabilities-object", announce_with(capabilities={"a": 1})),
    case("bzzz_announce", "capabilities-int-items", announce_with(capabilities=[1, 2])),
    case("bzzz_announce", "specialization-list", announce_with(specialization=["x"])),
    case("bzzz_announce", "max_tasks-string", announce_with(max_tasks="three")),
    case("bzzz_announce", "max_tasks-list", announce_with(max_tasks=[3])),
    case("bzzz_announce", "max_tasks-bool", announce_with(max_tasks=True)),
    case("bzzz_announce", "max_tasks-negative", announce_with(max_tasks=-1)),
    case("bzzz_announce", "max_tasks-zero", announce_with(max_tasks=0)),
    case("bzzz_announce", "max_tasks-huge", announce_with(max_tasks=10**12)),
    case("bzzz_announce", "max_tasks-fraction", announce_with(max_tasks=2.5)),
    case("bzzz_announce", "agent_id-100kb", announce_with(agent_id=BIG)),
    case("bzzz_announce", "role-100kb", announce_with(role=BIG)),
    case("bzzz_announce", "specialization-100kb", announce_with(specialization=BIG)),
    case("bzzz_announce", "capabilities-10000", announce_with(capabilities=MANY)),
    case("bzzz_announce", "capability-100kb", announce_with(capabilities=[BIG])),
    case("bzzz_announce", "agent_id-sql", announce_with(agent_id=SQL)),
    case("bzzz_announce", "agent_id-traversal", announce_with(agent_id=TRAVERSAL)),
    case("bzzz_announce", "agent_id-nul", announce_with(agent_id=NUL)),
    case("bzzz_announce", "agent_id-rtl", announce_with(agent_id=RTL)),
    case("bzzz_announce", "agent_id-newline", announce_with(agent_id="new-1\nrole: admin")),
    case("bzzz_announce", "role-crlf", announce_with(role="architect\r\nX-Injected: 1")),
    case("bzzz_announce", "agent_id-address", announce_with(agent_id=LONG_ADDRESS)),
    case("bzzz_announce", "agent_id-wildcard", announce_with(agent_id="*")),
    case("bzzz_announce", "agent_id-empty", announce_with(agent_id="")),
    case("bzzz_announce", "agent_id-reserved", announce_with(agent_id="subscriptions")),
    case("bzzz_announce", "project-colon", announce_with(project="a:b")),
    case("bzzz_announce", "task-traversal", announce_with(task=TRAVERSAL)),
    case("bzzz_announce", "id-of-another-session", announce_with(agent_id=PEER)),
    case("bzzz_announce", "extra-param", announce_with(is_admin=True)),
    *(
        case("bzzz_announce", f"agent_id-dots-{name}", announce_with(agent_id=dotted))
        for name, dotted in {
            "one": ".",
            "two": "..",
            "leading": ".a",
            "trailing": "a.",
            "double": "a..b",
        }.items()
    ),
    case("bzzz_announce", "project-trailing-dot", announce_with(project="shop.")),
    case("bzzz_announce", "specialization-empty", announce_with(specialization="")),
    case("bzzz_announce", "specialization-nul", announce_with(specialization="a\x00b")),
    case("bzzz_announce", "capability-empty", announce_with(capabilities=[""])),
    case("bzzz_announce", "capability-nul", announce_with(capabilities=["a\x00"])),
]

LOOKUP_CASES = [
    case("bzzz_lookup", "no-params", {}),
    case("bzzz_lookup", "address-int", {"semantic_address": 42}),
    case("bzzz_lookup", "address-list", {"semantic_address": ["bzzz://*"]}),
    *(
        case("bzzz_lookup", f"address-{name}", {"semantic_address": address})
        for name, address in HOSTILE_ADDRESSES.items()
        if name != "path-traversal"
    ),
    case("bzzz_lookup", "address-path-dotdot", {"semantic_address": f"bzzz://*/{TRAVERSAL}"}),
    case("bzzz_lookup", "filter-list", {"semantic_address": "bzzz://*", "filter_criteria": ["a"]}),
    case("bzzz_lookup", "filter-string", {"semantic_address": "bzzz://*", "filter_criteria": "x"}),
    case(
        "bzzz_lookup",
        "expertise-string",
        {"semantic_address": "bzzz://*", "filter_criteria": {"expertise": "security"}},
    ),
    case(
        "bzzz_lookup",
        "expertise-10000",
        {"semantic_address": "bzzz://*", "filter_criteria": {"expertise": MANY}},
    ),
    case(
        "bzzz_lookup",
        "threshold-above-one",
        {"semantic_address": "bzzz://*", "filter_criteria": {"performance_threshold": 5}},
    ),
    case(
        "bzzz_lookup",
        "threshold-negative",
        {"semantic_address": "bzzz://*", "filter_criteria": {"performance_threshold": -1}},
    ),
    case(
        "bzzz_lookup",
        "threshold-string",
        {"semantic_address": "bzzz://*", "filter_criteria": {"performance_threshold": "high"}},
    ),
    case(
        "bzzz_lookup",
        "availability-list",
        {"semantic_address": "bzzz://*", "filter_criteria": {"availability": [True]}},
    ),
    case(
        "bzzz_lookup",
        "filter-unknown-key",
        {"semantic_address": "bzzz://*", "filter_criteria": {"is_admin": True}},
    ),
    case("bzzz_lookup", "limit-negative", {"semantic_address": "bzzz://*", "limit": -1}),
    case("bzzz_lookup", "limit-huge", {"semantic_address": "bzzz://*", "limit": 10**12}),
    case(
        "bzzz_lookup",
        "limit-bool",
        {"semantic_address": "bzzz://*", "limit": True},
    ),
    case(
        "bzzz_lookup",
        "extra-param",
        {"semantic_address": "bzzz://*", "drop_tables": True},
    ),
]

GET_CASES = [
    case("bzzz_get", "no-params", {}),
    case("bzzz_get", "address-int", {"address": 42}),
    case("bzzz_get", "address-object", {"address": {"agent": OWNER}}),
    *(
        case("bzzz_get", f"address-{name}", {"address": address})
        for name, address in HOSTILE_ADDRESSES.items()
    ),
    case("bzzz_get", "thread-path-traversal", {"address": f"bzzz://{OWNER}/threads/../inbox"}),
    case("bzzz_get", "sql-in-agent", {"address": f"bzzz://{OWNER}' OR '1'='1"}),
    case("bzzz_get", "unknown-path", {"address": f"bzzz://{OWNER}/secrets"}),
    case("bzzz_get", "wildcard", {"address": "bzzz://*:architect@*:*"}),
    case("bzzz_get", "unknown-agent", {"address": "bzzz://nobody-1"}, NO_AGENT),
    case("bzzz_get", "unknown-thread", {"address": f"bzzz://{OWNER}/threads/t-0"}, NO_THREAD),
    case(
        "bzzz_get", "include_metadata-list", {"address": f"bzzz://{OWNER}", "include_metadata": [1]}
    ),
    case("bzzz_get", "max_history-string", {"address": f"bzzz://{OWNER}", "max_history": "ten"}),
    case("bzzz_get", "max_history-negative", {"address": f"bzzz://{OWNER}", "max_history": -1}),
    case("bzzz_get", "max_history-huge", {"address": f"bzzz://{OWNER}", "max_history": 10**12}),
    case(
        "bzzz_get",
        "max_history-bool",
        {"address": f"bzzz://{OWNER}", "max_history": True},
    ),
    case(
        "bzzz_get",
        "extra-param",
        {"address": f"bzzz://{OWNER}", "as_admin": True},
    ),
]

POST_CASES = [
    case("bzzz_post", "no-params", {}),
    case("bzzz_post", "missing-target", post_with(target_address=None)),
    case("bzzz_post", "missing-message_type", post_with(message_type=None)),
    case("bzzz_post", "missing-content", post_with(content=None)),
    case("bzzz_post", "target-int", post_with(target_address=1)),
    case("bzzz_post", "message_type-int", post_with(message_type=1)),
    case("bzzz_post", "content-string", post_with(content="hello")),
    case("bzzz_post", "content-list", post_with(content=["hello"])),
    case("bzzz_post", "content-int", post_with(content=5)),
    case("bzzz_post", "content-over-256kb", post_with(content=OVER_256_KB)),
    case("bzzz_post", "priority-unknown", post_with(priority="critical")),
    case("bzzz_post", "priority-int", post_with(priority=1)),
    case("bzzz_post", "thread_id-list", post_with(thread_id=["t"])),
    *(
        case("bzzz_post", f"target-{name}", post_with(target_address=address))
        for name, address in HOSTILE_ADDRESSES.items()
    ),
    case("bzzz_post", "message_type-newline", post_with(message_type="text\nX-Admin: 1")),
    case("bzzz_post", "message_type-100kb", post_with(message_type=BIG)),
    case("bzzz_post", "message_type-sql", post_with(message_type=SQL)),
    case("bzzz_post", "thread_id-traversal", post_with(thread_id=TRAVERSAL)),
    case("bzzz_post", "thread_id-nul", post_with(thread_id="t\x00")),
    case("bzzz_post", "thread_id-unknown", post_with(thread_id="thread-nope"), NO_THREAD),
    case("bzzz_post", "reply_to-sql", post_with(reply_to=SQL)),
    case("bzzz_post", "agent_id-of-another-session", post_with(agent_id=PEER)),
    case(
        "bzzz_post", "target-unknown-agent", post_with(target_address="bzzz://nobody-1"), NO_AGENT
    ),
    case("bzzz_post", "task_complete-without-task", post_with(message_type="task_complete")),
    case(
        "bzzz_post",
        "task_complete-task_id-int",
        post_with(message_type="task_complete", content={"task_id": 5}),
    ),
    case(
        "bzzz_post",
        "task_complete-unknown-task",
        post_with(message_type="task_failed", content={"task_id": "task-nope"}),
    ),
    case("bzzz_post", "extra-param", post_with(sender=PEER)),
    *(
        case("bzzz_post", f"message_type-slip-{slip}", post_with(message_type=slip))
        for slip in ("task", "task_complet", "task_assignmnet", "decisions", "Question", "t")
    ),
    case("bzzz_post", "content-nul-value", post_with(content={"text": "a\x00"})),
    case("bzzz_post", "content-nul-key", post_with(content={"a\x00": "x"})),
    case("bzzz_post", "content-nested-nul", post_with(content={"a": [{"b": "\x00"}]})),
    case("bzzz_post", "thread_id-dots", post_with(thread_id="a..b")),
    case("bzzz_post", "reply_to-leading-dot", post_with(reply_to=".msg")),
    case("bzzz_post", "agent_id-empty", post_with(agent_id="")),
]

THREAD_CASES = [
    case("bzzz_thread", "no-params", {}),
    case("bzzz_thread", "action-int", {"action": 1}),
    case("bzzz_thread", "action-unknown", {"action": "delete"}),
    case("bzzz_thread", "action-sql", {"action": "list'; DROP TABLE threads; --"}),
    case("bzzz_thread", "action-100kb", {"action": BIG}),
    case("bzzz_thread", "create-missing-topic", create_with(topic=None)),
    case("bzzz_thread", "create-missing-participants", create_with(participants=None)),
    case("bzzz_thread", "create-participants-string", create_with(participants=PEER)),
    case("bzzz_thread", "create-participants-object", create_with(participants={"a": PEER})),
    case("bzzz_thread", "create-participants-int-items", create_with(participants=[123])),
    case("bzzz_thread", "create-participants-10000", create_with(participants=MANY)),
    case("bzzz_thread", "create-participant-traversal", create_with(participants=[TRAVERSAL])),
    case("bzzz_thread", "create-participant-nul", create_with(participants=[NUL])),
    case(
        "bzzz_thread",
        "create-participant-unknown",
        create_with(participants=["nobody-1"]),
        NO_AGENT,
    ),
    case("bzzz_thread", "create-topic-int", create_with(topic=5)),
    case("bzzz_thread", "create-topic-list", create_with(topic=["design"])),
    case("bzzz_thread", "create-topic-100kb", create_with(topic=BIG)),
    case("bzzz_thread", "create-topic-blank", create_with(topic="   ")),
    case("bzzz_thread", "join-missing-thread_id", {"action": "join"}),
    case("bzzz_thread", "leave-missing-thread_id", {"action": "leave"}),
    case("bzzz_thread", "summarize-missing-thread_id", {"action": "summarize"}),
    case("bzzz_thread", "join-unknown", {"action": "join", "thread_id": "thread-0"}, NO_THREAD),
    case("bzzz_thread", "leave-unknown", {"action": "leave", "thread_id": "thread-0"}, NO_THREAD),
    case(
        "bzzz_thread",
        "summarize-unknown",
        {"action": "summarize", "thread_id": "thread-0"},
        NO_THREAD,
    ),
    case("bzzz_thread", "join-thread_id-traversal", {"action": "join", "thread_id": TRAVERSAL}),
    case("bzzz_thread", "join-thread_id-int", {"action": "join", "thread_id": 5}),
    case("bzzz_thread", "join-thread_id-100kb", {"action": "join", "thread_id": BIG}),
    case("bzzz_thread", "list-agent_id-of-another", {"action": "list", "agent_id": PEER}),
    case("bzzz_thread", "extra-param", {"action": "list", "force": True}),
    case("bzzz_thread", "create-topic-nul", create_with(topic="design\x00")),
    case("bzzz_thread", "create-topic-empty", create_with(topic="")),
    case("bzzz_thread", "join-thread_id-dot", {"action": "join", "thread_id": "."}),
    case(
        "bzzz_thread", "close-reason-nul", {"action": "close", "thread_id": "t", "reason": "\x00"}
    ),
    case("bzzz_thread", "review-criteria-empty", {"action": "review", "criteria": [""]}),
]

SUBSCRIBE_CASES = [
    case("bzzz_subscribe", "no-params", {}),
    case("bzzz_subscribe", "event_types-string", {"event_types": "agent_announcement"}),
    case("bzzz_subscribe", "event_types-object", {"event_types": {"agent_announcement": True}}),
    case("bzzz_subscribe", "event_types-int-items", {"event_types": [1]}),
    case("bzzz_subscribe", "event_types-empty", {"event_types": []}),
    case("bzzz_subscribe", "event_types-unknown", {"event_types": ["agent_announcement", "x"]}),
    case("bzzz_subscribe", "event_types-10000", {"event_types": MANY}),
    case("bzzz_subscribe", "event_types-100kb", {"event_types": [BIG]}),
    *(
        case(
            "bzzz_subscribe",
            f"filter-{name}",
            {"event_types": ["agent_announcement"], "filter_address": address},
        )
        for name, address in HOSTILE_ADDRESSES.items()
    ),
    case(
        "bzzz_subscribe",
        "filter-int",
        {"event_types": ["agent_announcement"], "filter_address": 5},
    ),
    *(
        case(
            "bzzz_subscribe",
            f"webhook-{name}",
            {"event_types": ["agent_announcement"], "callback_webhook": url},
        )
        for name, url in {
            "javascript": "javascript:alert(1)",
            "file": "file:///etc/passwd",
            "data": "data:text/html,<script>alert(1)</script>",
            "ftp": "ftp://example.com/hook",
            "no-host": "https://",
            "relative": "/hook",
            "credentials": "https://user:secret@example.com/hook",
            "crlf": "https://example.com/hook\r\nX-Injected: 1",
            "nul": "https://example.com/\x00hook",
            "tab": "https://exam\tple.com/hook",
            "100kb": "https://example.com/" + BIG,
            "int": 5,
            "list": ["https://example.com/hook"],
        }.items()
    ),
    case(
        "bzzz_subscribe",
        "extra-param",
        {"event_types": ["agent_announcement"], "subscriber_id": PEER},
    ),
]


@dataclass(slots=True)
class World:
    """Two agents in two sessions, a thread between them and a message in each inbox."""

    node: Node
    owner: Client
    thread_id: str

    async def snapshot(self) -> dict[str, Any]:
        """What a client can observe of the node, plus the event log and every table."""
        found = await call_ok(self.owner, "bzzz_lookup", {"semantic_address": "bzzz://*:*@*:*"})
        threads = await call_ok(self.owner, "bzzz_thread", {"action": "list"})
        inboxes = {
            agent: (await call_ok(self.owner, "bzzz_get", {"address": f"bzzz://{agent}/inbox"}))[
                "content"
            ]["messages"]
            for agent in (OWNER, PEER)
        }
        return {
            "agents": found["matches"],
            "threads": threads["result"],
            "inboxes": inboxes,
            "log_sequence": await self.node.bus.last_sequence(),
            "tables": await table_counts(self.node),
        }


async def _build_world(node: Node, owner: Client, peer: Client) -> World:
    await announce(owner, OWNER, capabilities=["system_design"])
    await announce(peer, PEER, role="reviewer")
    created = await call_ok(
        owner, "bzzz_thread", {"action": "create", "topic": "design", "participants": [PEER]}
    )
    await call_ok(owner, "bzzz_post", post_with(content={"text": "hello"}))
    await call_ok(peer, "bzzz_post", post_with(target_address=f"bzzz://{OWNER}"))
    await call_ok(owner, "bzzz_subscribe", {"event_types": ["agent_announcement"]})
    return World(node=node, owner=owner, thread_id=created["thread_id"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    """One world for every hostile call of a worker: each call is checked to change nothing,
    so the next one meets the same world (a call that changed it fails its own case).

    The clients run in a task of their own: an MCP client's task group must be entered and
    left in one task, and a fixture's set-up and tear-down are two."""
    data_dir = tmp_path_factory.mktemp("hostile") / "node"
    # Each refusal is audited; the trail's signed heads (on the log) are left for the stop,
    # as the records themselves are left out of the snapshot.
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
            async with (
                Client(server, mode="legacy") as owner,
                Client(server, mode="legacy") as peer,
            ):
                built.set_result(await _build_world(node, owner, peer))
                await done.wait()

    holder = asyncio.create_task(hold())
    try:
        yield await asyncio.wait_for(asyncio.shield(built), timeout=60)
    finally:
        done.set()
        await holder


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        *ANNOUNCE_CASES,
        *LOOKUP_CASES,
        *GET_CASES,
        *POST_CASES,
        *THREAD_CASES,
        *SUBSCRIBE_CASES,
    ],
)
async def test_a_hostile_call_gets_a_structured_error_and_changes_nothing(
    world: World, tool: str, arguments: dict[str, Any], code: str
) -> None:
    before = await world.snapshot()

    result = await world.owner.call_tool(tool, arguments)

    assert_error_response(result, code)
    assert await world.snapshot() == before


async def test_an_unknown_tool_gets_a_structured_error(connect: ClientFactory) -> None:
    async with connect() as client:
        result = await client.call_tool("bzzz_drop_tables", {"agent_id": SQL})

    error = assert_error_response(result, INVALID)
    assert "bzzz_drop_tables" in error["error"]


async def test_a_validation_error_names_the_field_without_echoing_the_input(
    connect: ClientFactory,
) -> None:
    secret = "s3cr3t-" + "x" * 300
    async with connect() as client:
        result = await client.call_tool("bzzz_announce", {"agent_id": secret, "role": "a"})

    error = assert_error_response(result, INVALID)
    assert "agent_id" in error["error"]
    assert secret not in str(result.content) + str(error)
