"""What a holder of the NATS login sees: spawned nodes, a nats-server whose store is not
encrypted, the official MCP client over HTTP, raw nats-py on every subject.

Node A serves p1, nodes B and C serve p2 (one queue group for p2's forwarded calls). A workload
puts a canary in every kind of content — a message, a thread's topic, a decision (and so a
consensus), a task's data and result, a reservation's reason — made on B and forwarded through
A, by MCP sessions whose ids are canaries too. A raw subscriber on ``>`` hears no content and no
session id on any subject, and no principal in any forwarded call or answer; after the workload
neither the nodes' data directories (SQLite and its WAL) nor the nats-server's JetStream store
hold any canary in clear. A captured forwarded request published again — to the same subject,
with a new inbox or with the one it named — runs nowhere: every member of the queue group
refuses it, counts and logs the refusal.

(``test_encryption_at_rest.py`` proves the same of messages, tasks and memories with the
embedded server, whose store is encrypted anyway, and of PostgreSQL.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import nats
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from nats.aio.msg import Msg

from bzzz.network.embedded import EmbeddedNats
from bzzz.network.forward import forward_subject

from .conftest import NodeFactory
from .support import CALL_TIMEOUT, HttpNode, bzzz_cli, call, eventually, start_network

pytestmark = pytest.mark.integration

NETWORK = "main"
MESSAGE = "CANARY-message-3b7d"
FORWARDED = "CANARY-forwarded-91ce"
TOPIC = "CANARY-topic-5a0f"
DECISION = "CANARY-decision-c4e2"
TASK_DATA = "CANARY-taskdata-7f18"
TASK_RESULT = "CANARY-taskresult-2d95"
RESERVATION = "CANARY-reservation-e06b"
PRINCIPAL = "principal-canary-48aa"  # the token's name; its id is found when it is made
CONTENT = (MESSAGE, FORWARDED, TOPIC, DECISION, TASK_DATA, TASK_RESULT, RESERVATION)


@pytest.fixture
async def plain_nats(tmp_path: Path) -> AsyncIterator[EmbeddedNats]:
    """A nats-server whose JetStream store is NOT encrypted: what it holds is readable."""
    server = EmbeddedNats(tmp_path / "plain-nats", cipher="none")
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
def nats_url(plain_nats: EmbeddedNats) -> str:
    """The nodes of these tests (``make_node``) on that server."""
    return plain_nats.client_url


@dataclass
class Heard:
    """Every message a raw subscriber received: subject, reply subject, bytes."""

    messages: list[tuple[str, str, bytes]] = field(default_factory=list)

    async def on(self, msg: Msg) -> None:
        self.messages.append((msg.subject, msg.reply, msg.data))

    def holding(self, needle: str, *, skip: tuple[bytes, ...] = ()) -> list[str]:
        """The subjects of messages whose bytes hold ``needle`` (messages holding any of
        ``skip`` aside)."""
        return [
            subject
            for subject, _, data in self.messages
            if needle.encode() in data and not any(s in data for s in skip)
        ]


@contextlib.asynccontextmanager
async def listening(url: str) -> AsyncIterator[Heard]:
    """A raw nats-py client with the NATS login on every subject, JetStream's and KV's too."""
    heard = Heard()
    nc = await nats.connect(url)
    try:
        for pattern in (">", "$JS.>", "$KV.>", "_INBOX.>"):
            await nc.subscribe(pattern, cb=heard.on)
        await nc.flush()
        yield heard
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def session(node: HttpNode, token: str) -> AsyncIterator[tuple[ClientSession, list[str]]]:
    """A legacy MCP session over HTTP with a bearer token, and the session id it was given."""
    ids: list[str] = []

    async def record(response: httpx2.Response) -> None:
        found = response.headers.get("mcp-session-id")
        if found and found not in ids:
            ids.append(found)

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=CALL_TIMEOUT,
        event_hooks={"response": [record]},
    )
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(http)
        read, write = await stack.enter_async_context(
            streamable_http_client(node.mcp_url, http_client=http)
        )
        client = await stack.enter_async_context(ClientSession(read, write))
        async with asyncio.timeout(CALL_TIMEOUT):
            await client.initialize()
        yield client, ids


async def owner_token(node: HttpNode, *nodes: HttpNode) -> tuple[str, str]:
    """A token of p1 and p2 named PRINCIPAL, known to every node: (secret, principal id)."""
    args = ["token", "create", PRINCIPAL, "--project", "p1", "--project", "p2", "--json"]
    shown = json.loads(await bzzz_cli(node.env, *args))
    token = str(shown["token"])

    async def whoami(at: HttpNode) -> int:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=5) as client:
            return (await client.get(f"{at.base_url}/api/v1/whoami")).status_code

    for at in (node, *nodes):
        await eventually(lambda at=at: whoami(at), lambda status: status == 200)
    return token, f"token:{shown['id']}"


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``needle``."""
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and needle.encode() in path.read_bytes()
    ]


async def forwarded(node: HttpNode, direction: str) -> dict[str, int]:
    """A node's forwarded calls so far, by outcome (its /healthz)."""
    return dict(((await node.health()).get("forwarding") or {}).get(direction) or {})


async def workload(a: HttpNode, b: HttpNode, token: str) -> list[str]:
    """Every kind of content, made on B and forwarded through A; the MCP session ids used."""
    async with session(b, token) as (boss, boss_ids), session(b, token) as (bob, bob_ids):
        await call(boss, "bzzz_announce", {"agent_id": "boss", "role": "lead", "project": "p2"})
        made = await call(bob, "bzzz_announce", {"agent_id": "bob", "role": "dev", "project": "p2"})
        handle = str(made["agent_handle"])
        to_bob = {"target_address": "bzzz://bob@p2", "message_type": "direct"}
        await call(boss, "bzzz_post", to_bob | {"content": {"text": MESSAGE}})
        thread = await call(
            boss, "bzzz_thread", {"action": "create", "topic": TOPIC, "participants": ["bob"]}
        )
        in_thread = {"target_address": "bzzz://*@p2", "thread_id": thread["thread_id"]}
        decision = await call(
            boss,
            "bzzz_post",
            in_thread | {"message_type": "decision", "content": {"text": DECISION}},
        )
        agreed = await call(
            bob,
            "bzzz_post",
            in_thread
            | {
                "message_type": "text",
                "content": {"text": "yes"},
                "reply_to": decision["message_id"],
                "stance": "agree",
            },
        )
        assert DECISION in json.dumps(agreed["consensus"])  # the caller sees it, in clear
        assigned = await call(
            boss,
            "bzzz_post",
            {
                "target_address": "bzzz://bob@p2",
                "message_type": "task_assignment",
                "content": {"description": "review", "task_data": {"x": TASK_DATA}},
            },
        )
        await call(
            bob,
            "bzzz_post",
            {
                "target_address": "bzzz://boss@p2",
                "message_type": "task_complete",
                "content": {"task_id": assigned["tasks"]["bob"], "result": TASK_RESULT},
            },
        )
        await call(
            boss, "bzzz_reserve", {"paths": ["src/app/**"], "reason": RESERVATION, "project": "p2"}
        )
        # Through A, which serves p1 only: B or C runs each call.
        async with session(a, token) as (on_a, a_ids):
            await call(on_a, "bzzz_announce", {"agent_id": "s-1", "role": "dev", "project": "p1"})
            sent = await call(
                on_a,
                "bzzz_post",
                to_bob | {"content": {"text": FORWARDED}, "agent_id": "s-1"},
            )
            inbox = await call(
                on_a, "bzzz_get", {"address": "bzzz://bob@p2/inbox", "agent_handle": handle}
            )
            tasks = await call(
                on_a, "bzzz_get", {"address": "bzzz://bob@p2/tasks", "agent_handle": handle}
            )
        # The forwarded answers carried the content to A's caller, in clear there.
        assert sent["delivery_results"]["recipients"] == ["bob"]
        assert MESSAGE in json.dumps(inbox) and FORWARDED in json.dumps(inbox)
        assert TASK_DATA in json.dumps(tasks)
    return [*boss_ids, *bob_ids, *a_ids]


async def test_no_canary_of_content_session_or_principal_crosses_nats_or_rests_in_a_store(
    make_node: NodeFactory, plain_nats: EmbeddedNats, tmp_path: Path
) -> None:
    a = make_node("a", BZZZ_PROJECTS="p1")
    b = make_node("b", BZZZ_PROJECTS="p2")
    c = make_node("c", BZZZ_PROJECTS="p2")
    await start_network(a, b, c)
    token, principal_id = await owner_token(a, b, c)
    async with listening(plain_nats.client_url) as heard:
        sessions = await workload(a, b, token)
        out_a = await forwarded(a, "out")
    assert len(sessions) == 3 and all(len(s) >= 16 for s in sessions)
    assert out_a == {"ok": 3}  # A forwarded the post and both reads

    # On the wire: the listener heard the forwarded calls and every envelope, and no canary.
    fwd = forward_subject(NETWORK, "p2")
    calls = [(s, r, d) for s, r, d in heard.messages if s == fwd]
    assert len(calls) >= 3 and all(d.startswith(b"bz1.") for _, _, d in calls)
    assert {needle: heard.holding(needle) for needle in (*CONTENT, *sessions)} == {
        needle: [] for needle in (*CONTENT, *sessions)
    }
    # Principals: the log's token and agent envelopes name tokens and owners by design (clear,
    # no content); nothing else does, forwarded calls and their answers above all.
    by_design = (b'"type":"token.', b'"type":"agent.')
    for needle in (principal_id, PRINCIPAL):
        assert heard.holding(needle, skip=by_design) == []

    # At rest, while the nodes run (the WAL holds the newest writes) ...
    stores = [node.data_dir for node in (a, b, c)] + [tmp_path / "plain-nats"]
    assert (tmp_path / "plain-nats" / "nats" / "jetstream").is_dir()
    for root in stores:
        assert {n: files_holding(root, n) for n in (*CONTENT, *sessions)} == {
            n: [] for n in (*CONTENT, *sessions)
        }, root
    # ... and once they stopped (SQLite folds the WAL into the database file).
    for node in (a, b, c):
        node.send(signal.SIGTERM)
        await node.wait_exit()
    for root in stores:
        assert [n for n in (*CONTENT, *sessions) if files_holding(root, n)] == [], root
    assert (b.data_dir / "bzzz.db").stat().st_size > 0


async def test_a_captured_forwarded_request_replayed_runs_on_no_member_of_the_queue_group(
    make_node: NodeFactory, plain_nats: EmbeddedNats
) -> None:
    a = make_node("a", BZZZ_PROJECTS="p1")
    b = make_node("b", BZZZ_PROJECTS="p2")
    c = make_node("c", BZZZ_PROJECTS="p2")
    await start_network(a, b, c)
    token, _ = await owner_token(a, b, c)
    async with session(b, token) as (on_b, _):
        made = await call(
            on_b, "bzzz_announce", {"agent_id": "bob", "role": "dev", "project": "p2"}
        )
        handle = str(made["agent_handle"])
        async with listening(plain_nats.client_url) as heard, session(a, token) as (on_a, _):
            await call(on_a, "bzzz_announce", {"agent_id": "s-1", "role": "dev", "project": "p1"})
            post = {"target_address": "bzzz://bob@p2", "message_type": "text", "agent_id": "s-1"}
            await call(on_a, "bzzz_post", post | {"content": {"text": FORWARDED}})
        fwd = forward_subject(NETWORK, "p2")
        [(subject, reply, captured)] = [(s, r, d) for s, r, d in heard.messages if s == fwd]

        async def inbox() -> list[dict[str, Any]]:
            asked = {"address": "bzzz://bob@p2/inbox", "agent_handle": handle}
            return list((await call(on_b, "bzzz_get", asked))["content"]["messages"])

        async def refused() -> int:
            counts = [await forwarded(node, "in") for node in (b, c)]
            return sum(count.get("refused", 0) for count in counts)

        before = await inbox()
        refused_before = await refused()
        nc = await nats.connect(plain_nats.client_url)
        try:
            # With an inbox of the attacker's own: the answer, a refusal, is sealed.
            answers = [(await nc.request(subject, captured, 5)).data for _ in range(4)]
            # With the inbox it named (the attacker saw it): refused by whichever member.
            for _ in range(4):
                await nc.publish(subject, captured, reply=reply)
            await nc.flush()
        finally:
            await nc.close()

        await eventually(refused, lambda n: n == refused_before + 8)
        after = await inbox()
    assert [m["id"] for m in after] == [m["id"] for m in before]
    assert [m["content"]["text"] for m in after] == [FORWARDED]  # stored once, never again
    assert all(answer.startswith(b"bz1.") and b"refused" not in answer for answer in answers)
    # Each refusal is on the audit trail of the member that refused it, with its reason.

    async def refusals() -> list[str]:
        outcomes = []
        for node in (b, c):
            shown = json.loads(await bzzz_cli(node.env, "audit", "list", "--json"))
            outcomes += [r["outcome"] for r in shown["records"] if r["outcome"].startswith("ref")]
        return sorted(outcomes)

    expected = ["refused:answer asked on another subject"] * 4 + ["refused:replayed request id"] * 4
    assert await eventually(refusals, lambda got: got == expected, within=30) == expected
