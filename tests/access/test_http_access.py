"""Spawned `bzzz serve` nodes and the official MCP client: principals, tokens, handles, leases.

Each scenario runs with the SDK's default sessionless client (2026-07-28) and with the legacy
handshake.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e.support import HttpNode, eventually, node_env

from .support import MODES, bzzz_cli, cli_env, create_token, mcp_client, ok, refused, tool

pytestmark = pytest.mark.integration

ADMIN = "admin-secret-for-tests-only"


async def start(data_dir: Path, logs: Path, env: dict[str, str], **extra: str) -> HttpNode:
    node = HttpNode(data_dir, node_env(env, data_dir, **extra), logs)
    await node.start()
    return node


@pytest.mark.parametrize("mode", MODES)
async def test_two_clients_without_credentials_keep_their_own_agents(
    mode: str, data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(data_dir, tmp_path / "logs", clean_env)
    try:
        async with mcp_client(node.mcp_url, mode) as a, mcp_client(node.mcp_url, mode) as b:
            made = await ok(a, "bzzz_announce", {"agent_id": "iso-a", "role": "dev"})
            handle = made["agent_handle"]
            assert handle.startswith("iso-a:")

            taken = await refused(
                b, "bzzz_announce", {"agent_id": "iso-a", "role": "spy"}, "INVALID_PARAMETERS"
            )
            assert "Agent ID already exists" in taken
            await ok(b, "bzzz_announce", {"agent_id": "iso-b", "role": "dev"})
            wrong = handle.rsplit(":", 1)[0] + ":not-the-secret"
            await refused(
                b,
                "bzzz_post",
                {"target_address": "bzzz://iso-b", "message_type": "text", "content": {},
                 "agent_id": "iso-a", "agent_handle": wrong},
                "PERMISSION_DENIED",
            )  # fmt: skip
            post = {"target_address": "bzzz://iso-b", "message_type": "text",
                    "content": {"text": "hi"}}  # fmt: skip
            if mode == "stateless":
                # Without its handle a sessionless call acts as nobody.
                await refused(a, "bzzz_post", post, "INVALID_PARAMETERS")
            sent = await ok(a, "bzzz_post", post | {"agent_handle": handle})
            assert sent["delivery_results"]["recipients"] == ["iso-b"]
            again = await ok(
                a,
                "bzzz_announce",
                {"agent_id": "iso-a", "role": "dev", "capabilities": ["go"],
                 "agent_handle": handle},
            )  # fmt: skip
            assert again["agent"]["capabilities"] == ["go"]
            seen = await ok(b, "bzzz_get", {"address": "bzzz://iso-a"})
            assert seen["content"]["agent_info"]["capabilities"] == ["go"]
    finally:
        await node.kill()


async def test_an_unused_sessionless_agent_goes_offline_with_its_lease(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(data_dir, tmp_path / "logs", clean_env, BZZZ_AGENTS__LEASE_SECONDS="1")
    try:
        async with (
            mcp_client(node.mcp_url, "stateless") as a,
            mcp_client(node.mcp_url, "stateless") as b,
        ):
            await ok(a, "bzzz_announce", {"agent_id": "leased", "role": "dev"})

            async def status() -> str:
                got = await ok(b, "bzzz_get", {"address": "bzzz://leased"})
                return str(got["content"]["agent_info"]["status"])

            assert await eventually(status, lambda s: s == "offline", within=10) == "offline"
            # Offline, the id is free for someone else.
            await ok(b, "bzzz_announce", {"agent_id": "leased", "role": "dev"})
    finally:
        await node.kill()


@pytest.mark.parametrize("mode", MODES)
async def test_two_principals_in_two_projects_see_and_do_only_their_own(
    mode: str, data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(data_dir, tmp_path / "logs", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    env = cli_env(clean_env, data_dir)
    one = create_token(env, "team one", "--project", "p1")["token"]
    two = create_token(env, "team two", "--project", "p2")["token"]
    reader = create_token(env, "watcher", "--project", "p1", "--scope", "read")["token"]
    try:
        async with (
            mcp_client(node.mcp_url, mode, one) as c1,
            mcp_client(node.mcp_url, mode, two) as c2,
            mcp_client(node.mcp_url, mode, reader) as cr,
            mcp_client(node.mcp_url, mode, ADMIN) as admin,
        ):
            made = await ok(c1, "bzzz_announce", {"agent_id": "one-dev", "role": "dev"})
            assert made["agent"]["project"] == "p1"
            await ok(c2, "bzzz_announce", {"agent_id": "two-dev", "role": "dev"})
            await check_isolation(c1, c2, cr, admin)
    finally:
        await node.kill()


async def check_isolation(c1: Any, c2: Any, reader: Any, admin: Any) -> None:
    """Every rule between team one (p1), team two (p2), a p1 reader and an admin."""
    await refused(
        c2, "bzzz_announce", {"agent_id": "x", "role": "dev", "project": "p1"}, "PERMISSION_DENIED"
    )
    await refused(c2, "bzzz_announce", {"agent_id": "one-dev", "role": "dev"}, "INVALID_PARAMETERS")
    found = await ok(c2, "bzzz_lookup", {"semantic_address": "bzzz://*"})
    assert [m["id"] for m in found["matches"]] == ["two-dev"]
    for address in ("bzzz://one-dev", "bzzz://one-dev/inbox", "bzzz://one-dev/tasks"):
        await refused(c2, "bzzz_get", {"address": address}, "AGENT_NOT_FOUND")
    task = {"target_address": "bzzz://one-dev", "message_type": "task_assignment",
            "content": {"task_type": "code_review", "description": "leak"}}  # fmt: skip
    await refused(c2, "bzzz_post", task, "AGENT_NOT_FOUND")
    thread = await ok(
        c1, "bzzz_thread", {"action": "create", "topic": "plans", "participants": ["one-dev"]}
    )
    thread_id = thread["thread_id"]
    for action in ("summarize", "join"):
        await refused(
            c2, "bzzz_thread", {"action": action, "thread_id": thread_id}, "THREAD_NOT_FOUND"
        )
    await refused(c2, "bzzz_get", {"address": f"bzzz://*/threads/{thread_id}"}, "THREAD_NOT_FOUND")
    await refused(reader, "bzzz_announce", {"agent_id": "r-1", "role": "dev"}, "PERMISSION_DENIED")
    seen = await ok(reader, "bzzz_lookup", {"semantic_address": "bzzz://*"})
    assert [m["id"] for m in seen["matches"]] == ["one-dev"]
    await refused(reader, "bzzz_get", {"address": "bzzz://one-dev/inbox"}, "PERMISSION_DENIED")
    # Nothing of the refused calls landed; the admin sees both teams and the empty inbox.
    everyone = await ok(admin, "bzzz_lookup", {"semantic_address": "bzzz://*"})
    assert sorted(m["id"] for m in everyone["matches"]) == ["one-dev", "two-dev"]
    inbox = await ok(admin, "bzzz_get", {"address": "bzzz://one-dev/inbox"})
    assert inbox["content"]["messages"] == []
    tasks = await ok(c1, "bzzz_get", {"address": "bzzz://one-dev/tasks"})
    assert tasks["content"]["tasks"] == []


async def test_the_http_door_refuses_bad_credentials_with_the_seeds_error_response(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(data_dir, tmp_path / "logs", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    try:
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            answers = {
                "none": await http.post("/mcp", json=ping),
                "no scheme": await http.post("/mcp", json=ping, headers={"Authorization": ADMIN}),
                "unknown": await http.post(
                    "/mcp", json=ping, headers={"Authorization": "Bearer nope"}
                ),
                "query": await http.post(f"/mcp?access_token={ADMIN}", json=ping),
            }
            lower = await http.post(
                "/mcp",
                json=ping,
                headers={"Authorization": f"bearer {ADMIN}", "Accept": "application/json"},
            )
            health = await http.get("/healthz")
            foreign = await http.get("/healthz", headers={"Host": "evil.example:7331"})
            metadata = await http.get("/.well-known/oauth-protected-resource")
            webhooks = await http.get("/webhooks")
    finally:
        await node.kill()
    for why, answer in answers.items():
        assert answer.status_code == 401, why
        # At /mcp a JSON-RPC error (what MCP clients show), the ErrorResponse in its data.
        rpc = answer.json()
        assert rpc["jsonrpc"] == "2.0" and rpc["error"]["code"] == -32001, (why, rpc)
        body = rpc["error"]["data"]
        assert body["success"] is False and body["code"] == "PERMISSION_DENIED", (why, body)
        assert {"error", "details", "timestamp"} <= body.keys()
        assert rpc["error"]["message"] == f"PERMISSION_DENIED: {body['error']}"
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith('Bearer resource_metadata="http://127.0.0.1:'), challenge
    assert lower.status_code not in (401, 403)
    assert health.status_code == 200
    assert foreign.status_code == 421
    assert metadata.json()["resource"] == f"{node.base_url}/mcp"
    assert "bzzz:write" in metadata.json()["scopes_supported"]
    assert webhooks.status_code == 401


async def test_a_revoked_token_is_refused_by_another_node_within_two_seconds(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    first = await start(data_dir, tmp_path / "logs-a", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    # The second node shares the directory: it joins the first one's network in its own slot.
    second = await start(data_dir, tmp_path / "logs-b", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    env = cli_env(clean_env, data_dir)
    created = create_token(env, "short-lived", "--project", "p1")
    try:
        async with mcp_client(second.mcp_url, "stateless", created["token"]) as client:
            await ok(client, "bzzz_lookup", {"semantic_address": "bzzz://*"})
        listed = bzzz_cli(env, "token", "list", "--json")
        assert created["id"] in listed.stdout and created["token"] not in listed.stdout
        done = bzzz_cli(env, "token", "revoke", created["id"])
        assert done.returncode == 0, done.stderr
        revoked_at = time.monotonic()
        ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Authorization": f"Bearer {created['token']}"}
        async with httpx.AsyncClient(timeout=5) as http:

            async def status() -> int:
                answer = await http.post(second.mcp_url, json=ping, headers=headers)
                return answer.status_code

            await eventually(status, lambda code: code == 401, within=2.0)
        assert time.monotonic() - revoked_at < 2.0 + 1.0  # the bound of eventually, plus a call
    finally:
        await second.kill()
        await first.kill()


async def test_an_expired_token_is_refused(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(data_dir, tmp_path / "logs", clean_env, BZZZ_AUTH_TOKENS=ADMIN)
    created = create_token(
        cli_env(clean_env, data_dir), "blink", "--project", "p1", "--expires", "5s"
    )  # 1 s was once past before a loaded machine's CLI printed the token as "active"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    try:
        async with httpx.AsyncClient(timeout=5) as http:

            async def status() -> int:
                answer = await http.post(
                    node.mcp_url, json=ping, headers={"Authorization": f"Bearer {created['token']}"}
                )
                return answer.status_code

            assert await eventually(status, lambda code: code == 401, within=30) == 401
    finally:
        await node.kill()
    assert created["status"] == "active" and created["expires_at"] is not None


async def test_a_node_on_another_address_without_credentials_refuses_to_start(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    env = node_env(clean_env, data_dir)
    done = await asyncio.to_thread(bzzz_cli, env, "serve", "--host", "0.0.0.0", "--port", "0")

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "without credentials" in lines[0], done.stderr
    assert not (data_dir / "nats").exists()


async def test_rate_limits_refuse_with_retry_after_and_store_nothing(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(
        data_dir,
        tmp_path / "logs",
        clean_env,
        BZZZ_LIMITS__AGENT_MESSAGES_PER_SECOND="0.5",
        BZZZ_LIMITS__BURST_SECONDS="2",
    )
    post = {"target_address": "bzzz://sink", "message_type": "text", "content": {"text": "x"}}
    try:
        async with mcp_client(node.mcp_url, "legacy") as client:
            await ok(client, "bzzz_announce", {"agent_id": "sink", "role": "dev"})
            await ok(client, "bzzz_announce", {"agent_id": "chatty", "role": "dev"})
            answers = [
                await tool(client, "bzzz_post", post | {"agent_id": "chatty"}) for _ in range(3)
            ]
            inbox = await ok(
                client, "bzzz_get", {"address": "bzzz://sink/inbox", "max_history": 50}
            )
    finally:
        await node.kill()
    assert [a["success"] for a in answers] == [True, False, False]
    limited = answers[1]
    assert limited["code"] == "RATE_LIMITED"
    assert 0 < limited["details"]["retry_after"] <= 2
    assert len(inbox["content"]["messages"]) == 1


async def test_one_client_flooding_sessions_and_sockets_leaves_the_node_to_others(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await start(
        data_dir,
        tmp_path / "logs",
        clean_env,
        BZZZ_AUTH_TOKENS=ADMIN,
        BZZZ_LIMITS__SESSIONS_PER_PRINCIPAL="10",
        BZZZ_LIMITS__HTTP_CONNECTIONS="60",
        BZZZ_LIMITS__HTTP_KEEPALIVE_SECONDS="1",
        BZZZ_LIMITS__HTTP_HEADER_TIMEOUT="1",
    )
    env = cli_env(clean_env, data_dir)
    flooder = create_token(env, "flooder", "--project", "p1")["token"]
    calm = create_token(env, "calm", "--project", "p1")["token"]
    opening = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }
    headers = {
        "Authorization": f"Bearer {flooder}",
        "Accept": "application/json, text/event-stream",
    }
    sockets: list[asyncio.StreamWriter] = []
    try:
        async with httpx.AsyncClient(base_url=node.base_url, timeout=10) as http:
            codes = [
                (await http.post("/mcp", json=opening, headers=headers)).status_code
                for _ in range(15)
            ]
        for _ in range(80):
            _, writer = await asyncio.open_connection("127.0.0.1", node.port)
            sockets.append(writer)

        async def answers() -> bool:
            try:
                async with mcp_client(node.mcp_url, "legacy", calm) as client:
                    found = await tool(client, "bzzz_lookup", {"semantic_address": "bzzz://*"})
                    return found["success"] is True
            except Exception:  # a refused connection while the idle sockets are reaped
                return False

        assert await eventually(answers, bool, within=15) is True
    finally:
        for writer in sockets:
            writer.close()
        await node.kill()
    # Past the bound the least recently used session without agents makes room: a loop of
    # empty sessions is never refused (tests/api/test_sessions.py refuses the full ones).
    assert codes == [200] * 15


async def test_a_node_serving_other_machines_refuses_every_loopback_webhook_spelling(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from events.test_targets import FORBIDDEN_SPELLINGS, LOOPBACK_SPELLINGS

    node = await start(
        data_dir, tmp_path / "logs", clean_env, BZZZ_AUTH_TOKENS=ADMIN, BZZZ_HTTP_HOST="0.0.0.0"
    )
    spellings = {**LOOPBACK_SPELLINGS, **FORBIDDEN_SPELLINGS}
    try:
        async with mcp_client(node.mcp_url, "legacy", ADMIN) as client:
            await ok(client, "bzzz_announce", {"agent_id": "hooked", "role": "dev"})
            answers = {
                why: await tool(
                    client,
                    "bzzz_subscribe",
                    {"event_types": ["agent_announcement"], "callback_webhook": url},
                )
                for why, url in spellings.items()
            }
    finally:
        await node.kill()
    accepted = {why: a for why, a in answers.items() if a["success"]}
    assert accepted == {}
    assert all(a["code"] == "INVALID_PARAMETERS" for a in answers.values())
