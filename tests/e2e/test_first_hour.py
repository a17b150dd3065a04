"""The first hour with the clients teams use (issue 33), against a spawned node.

`bzzz init` keeps its lead in: the node refuses callers without a token from then on, with a
401 that names the fix (what the MCP SDK's client raises says it too), and the printed token is
an admin. One agent token per agent lets the SDK's default `mcp.Client` — 2026-07-28,
stateless, one Authorization header, no session, no ``agent_handle`` — run the tour. A token
of a project reads the project's threads and tasks, not its agents' inboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from launch import bzzz_executable
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .conftest import NodeFactory
from .support import (
    CALL_TIMEOUT,
    TEST_NETWORK_KEY_B64,
    HttpNode,
    WebhookReceiver,
    eventually,
    kill_orphans,
    node_env,
)

pytestmark = pytest.mark.integration

SHOP = "shop"


def cli(node: HttpNode, *args: str) -> tuple[int, str, str]:
    """`bzzz …` on the node's data directory (its port, so printed URLs are the node's)."""
    env = {k: v for k, v in node.env.items() if not k.startswith("BZZZ_")}
    env |= {
        "BZZZ_DATA_DIR": str(node.data_dir),
        "BZZZ_NETWORK_KEY": TEST_NETWORK_KEY_B64,
        "BZZZ_HTTP_PORT": str(node.port),
    }
    if "BZZZ_NATS_URL" in node.env:
        env["BZZZ_NATS_URL"] = node.env["BZZZ_NATS_URL"]
    done = subprocess.run(
        [bzzz_executable(), *args], env=env, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout, done.stderr


async def bzzz(node: HttpNode, *args: str) -> dict[str, Any]:
    """A `bzzz … --json` command that must succeed: its one JSON object."""
    code, stdout, stderr = await asyncio.to_thread(cli, node, *args, "--json")
    assert code == 0, stderr
    answer: dict[str, Any] = json.loads(stdout)
    return answer


class Headers:
    """Every header an httpx2 client sent (to show no session header went out)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    async def __call__(self, request: httpx2.Request) -> None:
        self.sent.append({k.lower(): v for k, v in request.headers.items()})


@contextlib.asynccontextmanager
async def default_client(
    url: str, token: str | None = None, seen: Headers | None = None
) -> AsyncIterator[Client]:
    """The SDK's default client of ``url`` (auto mode: 2026-07-28), with one header at most."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    hooks = {"request": [seen]} if seen else {}
    http = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT, event_hooks=hooks)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's structured answer, success or ErrorResponse."""
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments)
    assert result.structured_content is not None, result
    return dict(result.structured_content)


async def ok(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call that must succeed."""
    body = await tool(client, name, arguments)
    assert body["success"] is True, (name, arguments, body)
    return body


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def started(make_node: NodeFactory, name: str) -> HttpNode:
    node = make_node(name)
    await node.start()
    return node


async def refused_without_token(node: HttpNode) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:

        async def probe() -> httpx.Response:
            return await http.get(f"{node.base_url}/api/v1/agents")

        try:
            return await eventually(probe, lambda answer: answer.status_code == 401, within=20)
        except pytest.fail.Exception:
            # The node's own account of why it did not answer, for the failure's reader.
            pytest.fail(f"no 401 from the node; its stderr:\n{node.stderr_tail()}")


async def test_bzzz_init_closes_the_node_with_a_401_that_names_the_fix_and_its_token_is_admin(
    make_node: NodeFactory,
) -> None:
    node = await started(make_node, "lead")
    shown = await bzzz(node, "init")
    rest = await refused_without_token(node)
    # The SDK's default client, no header at all: what it raises says what to do.
    with pytest.raises(BaseException) as raised:
        async with asyncio.timeout(CALL_TIMEOUT), default_client(node.mcp_url) as client:
            await client.call_tool("bzzz_lookup", {"semantic_address": "bzzz://*"})
    # The SDK raises it from its task groups: an MCPError inside exception groups.
    [sdk_error] = {str(e) for e in leaves(raised.value) if isinstance(e, MCPError)}
    # Cursor's configuration, as printed: its URL and its headers reach the node as an admin.
    cursor = shown["configs"]["cursor"]["mcpServers"]["bzzz"]
    async with httpx.AsyncClient(headers=cursor["headers"], timeout=10) as http:
        whoami = (await http.get(f"{node.base_url}/api/v1/whoami")).json()
    token = shown["token"]
    async with default_client(cursor["url"], token) as client:
        announced = await ok(client, "bzzz_announce", {"agent_id": "lead-1", "role": "lead"})
    # The Python snippet runs as printed, with the SDK's client, and finds the lead's agent.
    snippet = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", shown["configs"]["python"]],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "bzzz init" in rest.json()["error"] and "Authorization: Bearer" in rest.json()["error"]
    assert "'bzzz init'" in sdk_error and "Authorization: Bearer <token>" in sdk_error
    assert shown["mcp_url"] == node.mcp_url == cursor["url"]
    assert cursor["headers"] == {"Authorization": f"Bearer {token}"}
    assert shown["configs"]["claude_code"] == (
        f'claude mcp add --transport http bzzz {node.mcp_url} --header "Authorization: '
        f'Bearer {token}"'
    )
    assert f'TOKEN = "{token}"' in shown["configs"]["python"]
    assert whoami["principal"]["scope"] == "admin" and whoami["principal"]["projects"] == ["*"]
    assert announced["agent"]["id"] == "lead-1"
    assert snippet.returncode == 0, snippet.stderr
    assert "'lead-1'" in snippet.stdout, snippet.stdout


async def test_token_create_on_an_open_node_warns_that_the_node_closes(
    make_node: NodeFactory,
) -> None:
    node = await started(make_node, "open")
    first = await asyncio.to_thread(cli, node, "token", "create", "ci", "--project", SHOP)
    second = await asyncio.to_thread(cli, node, "token", "create", "ci2", "--project", SHOP)
    assert first[0] == 0 and second[0] == 0
    assert "refused (401)" in first[2] and "bzzz init" in first[2]
    assert "refused (401)" not in second[2]  # no longer the first credential


async def agent_tokens(node: HttpNode) -> tuple[str, str]:
    """The lead's `bzzz init`, then one agent token each for alice and bob of the shop."""
    await bzzz(node, "init")
    alice = await bzzz(node, "token", "create", "alice", "--agent", "alice", "--project", SHOP)
    bob = await bzzz(
        node, "token", "create", "bob", "--agent", "bob", "--project", SHOP, "--role", "reviewer"
    )
    assert (alice["agent"], bob["agent"]) == ("alice", "bob")
    return alice["token"], bob["token"]


async def test_two_agent_tokens_run_the_tour_with_the_default_client_and_no_handle_or_session(
    make_node: NodeFactory, receiver: WebhookReceiver
) -> None:
    node = await started(make_node, "tour")
    alice_token, bob_token = await agent_tokens(node)
    seen = Headers()
    async with (
        default_client(node.mcp_url, alice_token, seen) as alice,
        default_client(node.mcp_url, bob_token, seen) as bob,
    ):
        await ok(alice, "bzzz_announce", {"agent_id": "alice", "role": "developer"})
        await ok(bob, "bzzz_announce", {"agent_id": "bob", "role": "reviewer"})
        other = await tool(alice, "bzzz_announce", {"agent_id": "mallory", "role": "developer"})
        found = await ok(alice, "bzzz_lookup", {"semantic_address": f"bzzz://*@{SHOP}"})
        task = {"task_type": "code_review", "description": "review checkout", "task_data": {}}
        posted = await ok(
            alice,
            "bzzz_post",
            {"target_address": "bzzz://bob", "message_type": "task_assignment", "content": task},
        )
        inbox = await ok(bob, "bzzz_get", {"address": "bzzz://bob/inbox"})
        thread = await ok(
            alice,
            "bzzz_thread",
            {"action": "create", "participants": ["bob"], "topic": "checkout"},
        )
        thread_id = thread["thread_id"]
        await ok(
            bob,
            "bzzz_post",
            {"thread_id": thread_id, "message_type": "text", "content": {"text": "on it"}},
        )
        read = await ok(alice, "bzzz_get", {"address": f"bzzz://*/threads/{thread_id}"})
        reserved = await ok(alice, "bzzz_reserve", {"action": "reserve", "paths": ["src/**"]})
        released = await ok(alice, "bzzz_reserve", {"action": "release"})
        subscribed = await ok(
            bob,
            "bzzz_subscribe",
            {"event_types": ["task_assignment"], "callback_webhook": receiver.url},
        )
        removed = await ok(
            bob,
            "bzzz_subscribe",
            {"action": "unsubscribe", "subscription_id": subscribed["subscription_id"]},
        )

    assert other["success"] is False and other["code"] == "PERMISSION_DENIED", other
    assert "'alice'" in other["error"] and "'mallory'" in other["error"]
    assert {m["id"] for m in found["matches"]} == {"alice", "bob"}
    assert posted["delivery_results"]["recipients"] == ["bob"]
    assert [m["sender"] for m in inbox["content"]["messages"]] == ["alice"]
    messages = read["content"]["thread"]["messages"]
    assert [m["sender"] for m in messages][-1] == "bob"
    assert reserved["reservation"]["agent_id"] == "alice"
    assert released["released"] == [reserved["reservation"]["id"]]
    assert removed["status"] == "removed"
    # The default client spoke the sessionless revision: no session header, no handle.
    assert seen.sent, "no request was recorded"
    for headers in seen.sent:
        assert "mcp-session-id" not in headers and "x-bzzz-session" not in headers, headers
        assert headers["authorization"] in (f"Bearer {alice_token}", f"Bearer {bob_token}")


async def test_a_token_of_the_project_reads_its_threads_and_tasks_but_not_an_agents_inbox(
    make_node: NodeFactory,
) -> None:
    node = await started(make_node, "team")
    alice_token, bob_token = await agent_tokens(node)
    teammate = (await bzzz(node, "token", "create", "carol", "--project", SHOP))["token"]
    viewer = (await bzzz(node, "token", "create", "erin", "--project", SHOP, "--scope", "read"))[
        "token"
    ]
    other_project = (await bzzz(node, "token", "create", "dave", "--project", "other"))["token"]
    async with (
        default_client(node.mcp_url, alice_token) as alice,
        default_client(node.mcp_url, bob_token) as bob,
        default_client(node.mcp_url, teammate) as carol,
    ):
        await ok(alice, "bzzz_announce", {"agent_id": "alice", "role": "developer"})
        await ok(bob, "bzzz_announce", {"agent_id": "bob", "role": "reviewer"})
        await ok(carol, "bzzz_announce", {"agent_id": "carol-1", "role": "developer"})
        task = {"task_type": "code_review", "description": "review checkout", "task_data": {}}
        await ok(
            alice,
            "bzzz_post",
            {"target_address": "bzzz://bob", "message_type": "task_assignment", "content": task},
        )
        thread = await ok(
            alice, "bzzz_thread", {"action": "create", "participants": ["bob"], "topic": "t"}
        )
        thread_id = thread["thread_id"]
        # carol's agent took no part: her token reads the project's work all the same.
        read = await ok(carol, "bzzz_get", {"address": f"bzzz://*/threads/{thread_id}"})
        tasks = await ok(carol, "bzzz_get", {"address": "bzzz://bob/tasks"})
        inbox = await tool(carol, "bzzz_get", {"address": "bzzz://bob/inbox"})
        alice_reads_inbox = await tool(alice, "bzzz_get", {"address": "bzzz://bob/inbox"})
    async with default_client(node.mcp_url, viewer) as erin:
        # A read token with no agent at all lists the project's threads as itself.
        listed = await ok(erin, "bzzz_thread", {"action": "list"})
        viewed_tasks = await ok(erin, "bzzz_get", {"address": "bzzz://bob/tasks"})
    bearer = {"Authorization": f"Bearer {teammate}"}
    outsider = {"Authorization": f"Bearer {other_project}"}
    async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
        rest_threads = (await http.get("/api/v1/threads", headers=bearer)).json()
        rest_tasks = (await http.get("/api/v1/tasks", headers=bearer)).json()
        rest_inbox = await http.get(
            "/api/v1/content", params={"address": "bzzz://bob/inbox"}, headers=bearer
        )
        foreign_threads = (await http.get("/api/v1/threads", headers=outsider)).json()

    assert read["content"]["thread"]["id"] == thread_id
    assert [t["type"] for t in tasks["content"]["tasks"]] == ["code_review"]
    assert inbox["success"] is False and inbox["code"] == "PERMISSION_DENIED", inbox
    assert alice_reads_inbox["code"] == "PERMISSION_DENIED", alice_reads_inbox
    assert rest_inbox.status_code == 403, rest_inbox.text
    assert thread_id in [t["id"] for t in rest_threads["threads"]]
    assert [t["agent_id"] for t in rest_tasks["tasks"]] == ["bob"]
    assert foreign_threads["threads"] == []
    assert [t["id"] for t in listed["result"]] == [thread_id]
    assert len(viewed_tasks["content"]["tasks"]) == 1


async def test_bzzz_init_where_no_node_ran_prints_the_token_once_and_a_node_started_there_takes_it(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    data_dir = tmp_path / "fresh"
    node = HttpNode(data_dir, node_env(clean_env, data_dir), tmp_path / "logs")
    try:
        code, printed, errors = await asyncio.to_thread(cli, node, "init")
        assert code == 0, errors
        [secret] = set(re.findall(r"bzzz_[A-Za-z0-9_-]{40,}", printed))
        await node.start()
        without = await refused_without_token(node)
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            whoami = await http.get("/api/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
    finally:
        await node.kill()
        kill_orphans(data_dir)

    # Once as itself, and inside each configuration that carries it.
    assert printed.count(f"\n    {secret}\n") == 1
    assert f'--header "Authorization: Bearer {secret}"' in printed
    assert '"Authorization": "Bearer ' + secret + '"' in printed
    assert f'TOKEN = "{secret}"' in printed
    assert "refused (401)" in printed and "--agent AGENT_ID" in printed
    assert without.status_code == 401
    assert whoami.json()["principal"]["scope"] == "admin"
