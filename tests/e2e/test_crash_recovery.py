"""kill -9 of a node in the middle of a scenario: after a restart nothing is lost."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from .support import (
    START_TIMEOUT,
    STOP_TIMEOUT,
    HttpNode,
    WebhookReceiver,
    alive,
    call,
    eventually,
    free_port,
    http_session,
    nats_servers_of,
    node_env,
    signature_valid,
    stdio_session,
    wait_until,
)

pytestmark = pytest.mark.integration

ARCHITECT = "architect-001"
REVIEWER = "reviewer-001"


async def before_the_crash(a: ClientSession, b: ClientSession, dead_hook: str) -> dict[str, Any]:
    """Agents, a thread with messages, a direct message, a webhook whose receiver is down."""
    await call(a, "bzzz_announce", {"agent_id": ARCHITECT, "role": "architect"})
    await call(b, "bzzz_announce", {"agent_id": REVIEWER, "role": "reviewer"})
    created = await call(
        a,
        "bzzz_thread",
        {"action": "create", "participants": [REVIEWER], "topic": "Storage engine"},
    )
    thread_id = created["thread_id"]
    question = await call(
        a,
        "bzzz_post",
        {
            "target_address": f"bzzz://{REVIEWER}",
            "message_type": "question",
            "content": {"text": "SQLite or PostgreSQL for the default store?"},
            "thread_id": thread_id,
        },
    )
    decision = await call(
        b,
        "bzzz_post",
        {
            "target_address": f"bzzz://{ARCHITECT}",
            "message_type": "decision",
            "content": {"text": "SQLite by default, PostgreSQL when configured."},
            "thread_id": thread_id,
            "reply_to": question["message_id"],
        },
    )
    direct = await call(
        a,
        "bzzz_post",
        {
            "target_address": f"bzzz://{REVIEWER}",
            "message_type": "text",
            "content": {"text": "Please look at the migration too."},
        },
    )
    subscription = await call(
        b,
        "bzzz_subscribe",
        {"event_types": ["thread_created"], "callback_webhook": dead_hook},
    )
    # This event's delivery is queued while nobody listens at the webhook.
    pending = await call(
        a,
        "bzzz_thread",
        {"action": "create", "participants": [REVIEWER], "topic": "Release plan"},
    )
    return {
        "thread_id": thread_id,
        "message_ids": [question["message_id"], decision["message_id"]],
        "direct_id": direct["message_id"],
        "subscription": subscription,
        "pending_thread_id": pending["thread_id"],
    }


async def kill_node(node: HttpNode, data_dir: Path) -> None:
    """SIGKILL the node; its embedded nats-server must not outlive it."""
    servers = nats_servers_of(data_dir)
    assert len(servers) == 1, servers
    node.send(signal.SIGKILL)
    assert await node.wait_exit() == -signal.SIGKILL
    async with asyncio.timeout(STOP_TIMEOUT):
        await wait_until(lambda: not alive(servers[0]))
    assert nats_servers_of(data_dir) == []


async def after_the_restart(c: ClientSession, state: dict[str, Any]) -> None:
    """Agents, threads and messages are all there."""
    lookup = await call(c, "bzzz_lookup", {"semantic_address": "bzzz://*"})
    agents = {m["id"]: m for m in lookup["matches"]}
    assert sorted(agents) == [ARCHITECT, REVIEWER]
    # Their sessions died with the node: offline is the honest status now.
    assert {m["status"] for m in agents.values()} <= {"offline", "idle"}

    got = await call(c, "bzzz_get", {"address": f"bzzz://{ARCHITECT}/threads/{state['thread_id']}"})
    thread = got["content"]["thread"]
    assert thread["topic"] == "Storage engine"
    assert sorted(thread["participants"]) == [ARCHITECT, REVIEWER]
    assert [m["id"] for m in thread["messages"]] == state["message_ids"]
    assert [m["messageType"] for m in thread["messages"]] == ["question", "decision"]

    pending = await call(
        c, "bzzz_get", {"address": f"bzzz://{ARCHITECT}/threads/{state['pending_thread_id']}"}
    )
    assert pending["content"]["thread"]["topic"] == "Release plan"

    inbox = await call(c, "bzzz_get", {"address": f"bzzz://{REVIEWER}/inbox"})
    ids = {m["id"] for m in inbox["content"]["messages"]}
    assert {state["direct_id"], state["message_ids"][0]} <= ids


# A healthy restart catches up with a few dozen envelopes in well under a second; the bound is
# a process start's (a loaded CI machine starts Python slowly), not a speed claim.
RESTART_TIMEOUT = START_TIMEOUT


async def test_a_node_restarted_after_a_clean_stop_comes_back(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Stop a node cleanly (stdin closed), start it again: it serves, its agent is known."""
    env = node_env(clean_env, data_dir)
    with (tmp_path / "stdio.err").open("w") as err:
        async with stdio_session(env, err) as session:
            await call(session, "bzzz_announce", {"agent_id": ARCHITECT, "role": "architect"})
    node = HttpNode(data_dir, env, tmp_path / "logs")
    try:
        await node.start(within=RESTART_TIMEOUT)
        async with http_session(node.mcp_url) as c:
            got = await call(c, "bzzz_get", {"address": f"bzzz://{ARCHITECT}"})
            assert got["content"]["agent_info"]["status"] == "offline"
    finally:
        await node.kill()


# Not strict: the same bug, but whether it shows depends on a race this test cannot steer.
# If the killed nats-server had not yet written the consumer's last acks to disk, the restarted
# node gets those envelopes again, reaches the last sequence and the test passes.
async def test_kill_9_in_the_middle_loses_nothing(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Agents, threads, messages and a pending webhook delivery survive a SIGKILL."""
    node = HttpNode(data_dir, node_env(clean_env, data_dir), tmp_path / "logs")
    hook = WebhookReceiver()
    dead_port = free_port()
    try:
        await node.start()
        # The sessions stay open across the kill, as real clients would; they are not told.
        async with contextlib.AsyncExitStack() as stack:
            a = await stack.enter_async_context(
                http_session(node.mcp_url, terminate_on_close=False)
            )
            b = await stack.enter_async_context(
                http_session(node.mcp_url, terminate_on_close=False)
            )
            state = await before_the_crash(a, b, f"http://127.0.0.1:{dead_port}/hook")
            # The receiver refused the connection: the delivery is queued for a retry.
            await eventually(node.health, lambda h: h["webhooks"]["failed_attempts"] >= 1)
            await kill_node(node, data_dir)

        await hook.start(dead_port)
        await node.start(within=RESTART_TIMEOUT)
        async with http_session(node.mcp_url) as c:
            await after_the_restart(c, state)

        await hook.wait_for(lambda seen: any(x.status == 200 for x in seen), within=15)
        delivered = next(x for x in hook.attempts if x.status == 200)
        event = delivered.json()
        assert event["event_type"] == "thread_created"
        assert event["data"]["thread_id"] == state["pending_thread_id"]
        secret = state["subscription"]["webhook_secret"]
        assert signature_valid(secret, delivered.headers["x-bzzz-signature"], delivered.body)
    finally:
        await node.kill()
        await hook.close()
