"""Legacy MCP sessions over HTTP on spawned nodes: each belongs to its principal, and a client
opening sessions in a loop leaves room for every other."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from access.support import cli_env, create_token, mcp_client, ok, refused
from e2e.support import CALL_TIMEOUT, HttpNode, node_env
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.integration

ADMIN = "admin-secret-for-tests-only"
OPENING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "loop", "version": "0"},
    },
}
ACCEPT = "application/json, text/event-stream"


async def spawn(data_dir: Path, logs: Path, env: dict[str, str], **extra: str) -> HttpNode:
    node = HttpNode(data_dir, node_env(env, data_dir, **extra), logs)
    await node.start(within=60)
    return node


@contextlib.asynccontextmanager
async def legacy_client(url: str, token: str) -> AsyncIterator[tuple[Client, list[str]]]:
    """The official client with the legacy handshake, and the session id it was given."""
    seen: list[str] = []

    async def record(response: httpx2.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id and session_id not in seen:
            seen.append(session_id)

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=CALL_TIMEOUT,
        event_hooks={"response": [record]},
    )
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode="legacy") as client:
        yield client, seen


async def test_another_principal_naming_a_session_is_answered_as_for_an_unknown_one(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await spawn(data_dir, tmp_path / "logs", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    env = cli_env(clean_env, data_dir)
    owner = create_token(env, "owner", "--project", "p1")["token"]
    other = create_token(env, "other", "--project", "p1")["token"]
    lookup = {"name": "bzzz_lookup", "arguments": {"semantic_address": "bzzz://*"}}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": lookup}
    try:
        async with legacy_client(node.mcp_url, owner) as (client, seen):
            await ok(client, "bzzz_announce", {"agent_id": "owned", "role": "dev"})
            (session_id,) = seen
            stolen = {
                "Authorization": f"Bearer {other}",
                "Accept": ACCEPT,
                "Mcp-Session-Id": session_id,
                "Mcp-Protocol-Version": "2025-11-25",
            }
            unknown = stolen | {"Mcp-Session-Id": "0" * 32}
            async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
                answers = {
                    "POST": await http.post("/mcp", json=call, headers=stolen),
                    "GET": await http.get("/mcp", headers=stolen),
                    "DELETE": await http.delete("/mcp", headers=stolen),
                }
                as_unknown = await http.post("/mcp", json=call, headers=unknown)
            # The session still serves its owner, and its agent is online.
            found = await ok(client, "bzzz_get", {"address": "bzzz://owned"})
    finally:
        await node.kill()
    for method, answer in answers.items():
        assert answer.status_code == 404, (method, answer.text)
        assert answer.json() == as_unknown.json(), method
    assert as_unknown.status_code == 404
    assert found["content"]["agent_info"]["status"] != "offline"


async def test_a_loop_opening_sessions_far_past_the_limit_leaves_room_for_another_client(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    # No credential: every caller is the one anonymous principal, as in the report.
    node = await spawn(data_dir, tmp_path / "logs", clean_env)
    headers = {"Accept": ACCEPT}
    try:
        async with mcp_client(node.mcp_url, "legacy") as holder:
            await ok(holder, "bzzz_announce", {"agent_id": "holder", "role": "dev"})
            # The report's loop opened 3,000; three times the default limit (200) already makes
            # each of the last 400 end the least recently used session that holds no agent.
            async with httpx.AsyncClient(base_url=node.base_url, timeout=30) as http:
                statuses = [
                    (await http.post("/mcp", json=OPENING, headers=headers)).status_code
                    for _ in range(600)
                ]
            async with mcp_client(node.mcp_url, "legacy") as newcomer:
                found = await ok(newcomer, "bzzz_lookup", {"semantic_address": "bzzz://*"})
            # The session holding an agent was not the one ended to make room.
            still = await ok(holder, "bzzz_get", {"address": "bzzz://holder"})
    finally:
        await node.kill()
    assert set(statuses) == {200}
    assert [m["id"] for m in found["matches"]] == ["holder"]
    assert still["content"]["agent_info"]["status"] != "offline"


async def test_only_sessions_holding_agents_count_toward_a_refusal(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await spawn(
        data_dir, tmp_path / "logs", clean_env, BZZZ_LIMITS__SESSIONS_PER_PRINCIPAL="2"
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            for n in range(2):
                client = await stack.enter_async_context(mcp_client(node.mcp_url, "legacy"))
                await ok(client, "bzzz_announce", {"agent_id": f"busy-{n}", "role": "dev"})
            async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
                refused_answer = await http.post("/mcp", json=OPENING, headers={"Accept": ACCEPT})
            # A sessionless client is not a session: it is served.
            async with mcp_client(node.mcp_url, "stateless") as sessionless:
                await ok(sessionless, "bzzz_lookup", {"semantic_address": "bzzz://*"})
                await refused(
                    sessionless, "bzzz_announce", {"agent_id": "busy-0", "role": "x"},
                    "INVALID_PARAMETERS",
                )  # fmt: skip
    finally:
        await node.kill()
    assert refused_answer.status_code == 429
    body: dict[str, Any] = refused_answer.json()
    assert body["code"] == "RATE_LIMITED" and body["details"]["limit"] == "sessions_per_principal"
    assert "2 MCP sessions with agents" in body["error"]


async def test_a_listener_hears_only_its_own_subscription_of_those_it_names(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await spawn(data_dir, tmp_path / "logs", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    env = cli_env(clean_env, data_dir)
    maker = create_token(env, "maker", "--project", "p1")["token"]
    other = create_token(env, "other", "--project", "p1")["token"]
    wanted = {"event_types": ["agent_announcement"]}
    try:
        async with (
            mcp_client(node.mcp_url, "stateless", maker) as a,
            mcp_client(node.mcp_url, "stateless", other) as b,
        ):
            theirs = (await ok(a, "bzzz_subscribe", wanted))["resource_uri"]
            own = (await ok(b, "bzzz_subscribe", wanted))["resource_uri"]
            async with (
                a.listen(resource_subscriptions=[theirs]) as makers,
                b.listen(resource_subscriptions=[theirs, own]) as others,
            ):
                await ok(b, "bzzz_announce", {"agent_id": "fires", "role": "dev"})
                async with asyncio.timeout(CALL_TIMEOUT):
                    heard = await makers.__anext__()
                    heard_own = await others.__anext__()
    finally:
        await node.kill()
    assert makers.honored is not None and others.honored is not None
    assert makers.honored.resource_subscriptions == [theirs]
    # Another's subscription is left out, as an unknown URI would be.
    assert others.honored.resource_subscriptions == [own]
    assert str(heard.uri) == theirs and str(heard_own.uri) == own
