"""Any node is a front door: spawned p1 and p2 nodes, the official MCP client, raw nats-py.

The nodes keep the log, the directory and their peers in R3 streams and buckets of a real
3-server NATS cluster. Node A serves p1, node B serves p2 (``BZZZ_PROJECTS``); A stores none
of p2's content and answers lookups of p2 from the directory as B answers them from its store.
Calls about p2 made through A are answered by B as B answers them directly; a principal of
p1 only is refused as on B; forged, unadmitted and replayed requests change nothing; a project
no node serves is a NETWORK_ERROR naming it; and killing B during a stream of forwarded posts
loses none that was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import nats
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

from bzzz.errors import BzzzError
from bzzz.network.forward import (
    ForwardRequest,
    ForwardWire,
    WireCaller,
    WirePrincipal,
    forward_subject,
)
from bzzz.network.identity import NodeIdentity
from bzzz.principal import Principal, Scope

from .cluster import NatsCluster
from .conftest import NodeFactory
from .support import (
    TEST_KEYRING,
    HttpNode,
    bzzz_cli,
    call,
    call_error,
    eventually,
    http_session,
    start_network,
)

pytestmark = pytest.mark.integration

NETWORK = "main"
R3 = {"BZZZ_BZZZ__STREAM_REPLICAS": "3", "BZZZ_BZZZ__PUBLISH_TIMEOUT": "4"}


@pytest.fixture
def nats_url(cluster: NatsCluster) -> str:
    """The nodes of these tests (``make_node``) on the 3-server cluster: every server's URL."""
    return ",".join(cluster.urls)


async def _token(node: HttpNode, name: str, *projects: str, scope: str = "write") -> str:
    args = ["token", "create", name, "--scope", scope, "--json"]
    for project in projects:
        args += ["--project", project]
    shown = json.loads(await bzzz_cli(node.env, *args))
    return str(shown["token"])


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextlib.asynccontextmanager
async def _mcp(node: HttpNode, token: str) -> AsyncIterator[ClientSession]:
    async with http_session(node.mcp_url, headers=_bearer(token)) as session:
        yield session


@contextlib.asynccontextmanager
async def _stateless(node: HttpNode, token: str) -> AsyncIterator[Client]:
    """The SDK's default client (2026-07-28: no handshake, no session) with a bearer token."""
    http = httpx2.AsyncClient(headers=_bearer(token))
    async with http, Client(streamable_http_client(node.mcp_url, http_client=http)) as client:
        yield client


async def _tool(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with asyncio.timeout(30):
        result = await client.call_tool(tool, arguments)
    assert not result.is_error and result.structured_content is not None, result
    return dict(result.structured_content)


async def _knows_token(node: HttpNode, token: str) -> None:
    async def whoami() -> int:
        async with httpx.AsyncClient(headers=_bearer(token), timeout=5) as client:
            return (await client.get(f"{node.base_url}/api/v1/whoami")).status_code

    await eventually(whoami, lambda status: status == 200)


async def _rest(node: HttpNode, token: str, path: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(headers=_bearer(token), timeout=10) as client:
        response = await client.get(f"{node.base_url}{path}")
    return response.status_code, dict(response.json())


def _read(answer: dict[str, Any]) -> dict[str, Any]:
    """A read's answer without the time it was read."""
    return {k: v for k, v in answer.items() if k not in ("retrieved_at", "timestamp")}


def _lookup(answer: dict[str, Any]) -> dict[str, Any]:
    """A lookup's answer without the time it was made and the agents' last activity."""
    shown = {k: v for k, v in answer.items() if k != "query_time"}
    shown["matches"] = [
        {k: v for k, v in match.items() if k != "last_activity"} for match in answer["matches"]
    ]
    return shown


def _post_shape(answer: dict[str, Any]) -> dict[str, Any]:
    """A post's answer without what differs from one post to the next (ids and timing)."""
    shown = {k: v for k, v in answer.items() if k not in ("message_id", "posted_at", "tasks")}
    shown["tasks"] = sorted(answer.get("tasks") or {})  # whose task, not its fresh id
    shown["delivery_results"] = {
        k: v for k, v in answer["delivery_results"].items() if k != "delivery_time"
    }
    return shown


async def _forwarded(node: HttpNode, direction: str) -> dict[str, int]:
    forwarding = (await node.health()).get("forwarding") or {}
    return dict(forwarding.get(direction) or {})


async def _announce(session: ClientSession, agent_id: str, project: str) -> str:
    made = await call(
        session, "bzzz_announce", {"agent_id": agent_id, "role": "dev", "project": project}
    )
    return str(made["agent_handle"])


async def _inbox(session: ClientSession, agent: str, handle: str) -> list[dict[str, Any]]:
    got = await call(
        session,
        "bzzz_get",
        {"address": f"bzzz://{agent}@p2/inbox", "agent_handle": handle, "max_history": 1000},
    )
    return list(got["content"]["messages"])


def _key_of(node: HttpNode) -> NodeIdentity:
    return NodeIdentity.load_or_create(node.data_dir)


def _wire(signer: NodeIdentity) -> ForwardWire:
    """Requests sealed under the network's key (an attacker with a node's data directory has
    it) and signed by ``signer``; answers taken from any signer (the test reads refusals)."""
    return ForwardWire(signer, NETWORK, lambda key, node_id: True, TEST_KEYRING)


def _body(
    signer: NodeIdentity, request_id: str, op: str, params: dict[str, Any], reply: str
) -> ForwardRequest:
    who = Principal("token:forger", "token", frozenset({"*"}), frozenset({"*"}), Scope.ADMIN)
    return ForwardRequest(
        id=request_id,
        network=NETWORK,
        project="p2",
        op=op,  # type: ignore[arg-type]
        params=params,
        caller=WireCaller(session_id="principal-forger", principal=WirePrincipal.of(who)),
        sender="forger" if op == "post" else None,
        reply=reply,
        origin=signer.node_id,
        origin_key=signer.public_key_b64,
        at=time.time(),
    )


async def test_calls_about_p2_through_the_p1_node_are_answered_as_the_p2_node_answers(
    make_node: NodeFactory, nats_url: str
) -> None:
    a = make_node("a", BZZZ_PROJECTS="p1", **R3)
    b = make_node("b", BZZZ_PROJECTS="p2", **R3)
    await start_network(a, b)
    owner = await _token(a, "owner", "p1", "p2")
    p1_only = await _token(a, "p1-only", "p1")
    for node in (a, b):
        await _knows_token(node, owner)
        await _knows_token(node, p1_only)
    async with _mcp(a, owner) as on_a, _mcp(b, owner) as on_b, _mcp(a, p1_only) as p1_on_a:
        await _announce(on_a, "s-1", "p1")
        w2 = await _announce(on_b, "w-2", "p2")
        await _announce(on_b, "s-2", "p2")
        post = {
            "target_address": "bzzz://w-2@p2",
            "message_type": "task_assignment",
            "content": {"description": "ship it"},
        }

        # A post: through A from its p1 agent, and on B from a p2 agent.
        via_a = await call(on_a, "bzzz_post", post | {"agent_id": "s-1"})
        on_b_directly = await call(on_b, "bzzz_post", post | {"agent_id": "s-2"})
        assert _post_shape(via_a) == _post_shape(on_b_directly)
        assert via_a["delivery_results"]["recipients"] == ["w-2"]

        # Its inbox, its tasks, a thread: through A and on B, the same answers.
        for path in ("inbox", "tasks"):
            asked = {"address": f"bzzz://w-2@p2/{path}", "agent_handle": w2}
            assert _read(await call(on_a, "bzzz_get", asked)) == _read(
                await call(on_b, "bzzz_get", asked)
            )
        senders = [m["sender"] for m in await _inbox(on_a, "w-2", w2)]
        assert sorted(senders) == ["s-1", "s-2"]  # the p1 agent is named as A found it
        created = await call(
            on_b,
            "bzzz_thread",
            {"action": "create", "participants": ["s-2"], "topic": "plan", "agent_id": "w-2"},
        )
        thread = {"address": f"bzzz://*@p2/threads/{created['thread_id']}", "agent_handle": w2}
        assert _read(await call(on_a, "bzzz_get", thread)) == _read(
            await call(on_b, "bzzz_get", thread)
        )
        # The same through the REST routes (a thread's project named by ?project=).
        for path in (
            f"/api/v1/threads/{created['thread_id']}?project=p2",
            "/api/v1/tasks?agent_id=w-2",
            "/api/v1/agents/w-2",
        ):
            status_a, body_a = await _rest(a, owner, path)
            status_b, body_b = await _rest(b, owner, path)
            assert (status_a, _read(body_a)) == (status_b, _read(body_b)) == (200, _read(body_b))

        # An agent of p2 whose session ended: offline in B's store, and listed so in the
        # directory (the stores keep offline agents, so lookups of either kind list it).
        async with _mcp(b, owner) as leaving:
            await _announce(leaving, "gone-2", "p2")
        gone = {"semantic_address": "bzzz://gone-2@p2"}
        seen = await eventually(
            lambda: call(on_a, "bzzz_lookup", gone),
            lambda found: [m["status"] for m in found["matches"]] == ["offline"],
        )
        assert [m["status"] for m in seen["matches"]] == ["offline"]

        # Lookups of p2 on A come from the directory: the same matches, order and scores as B's
        # store gives (an agent's last activity there is as of its lease's last write, not its
        # last post); and A's own store holds none of p2's agents, messages, threads or tasks.
        for address in ("bzzz://*:*@p2", "bzzz://w-2@p2", "bzzz://*:dev@p2", "bzzz://gone-2@p2"):
            asked = {"semantic_address": address}
            assert _lookup(await call(on_a, "bzzz_lookup", asked)) == _lookup(
                await call(on_b, "bzzz_lookup", asked)
            )
        assert _p2_rows(a) == {}
        assert _p2_rows(b) != {}

        # A principal of p1 only: refused through A exactly as on B.
        inbox = {"address": "bzzz://w-2@p2/inbox"}
        async with _mcp(b, p1_only) as p1_on_b:
            refused_a = await call_error(p1_on_a, "bzzz_get", inbox)
            refused_b = await call_error(p1_on_b, "bzzz_get", inbox)
        assert _read(refused_a) == _read(refused_b)
        assert refused_a["code"] == "AGENT_NOT_FOUND"
        await _announce(p1_on_a, "s-5", "p1")
        refused_post = await call_error(p1_on_a, "bzzz_post", post)
        assert refused_post["code"] == "AGENT_NOT_FOUND"
        status, body = await _rest(a, p1_only, "/api/v1/tasks?agent_id=w-2")
        assert (status, body["code"]) == (404, "AGENT_NOT_FOUND")

        # The SDK's default client (2026-07-28, no session) on A announces a p2 agent (it lives
        # on B) and posts as it by its handle; B's store has it, A's none of it.
        async with _stateless(a, owner) as client:
            made = await _tool(
                client, "bzzz_announce", {"agent_id": "w-7", "role": "dev", "project": "p2"}
            )
            sent = await _tool(
                client,
                "bzzz_post",
                {"target_address": "bzzz://w-2@p2", "message_type": "text", "content": {"n": 7},
                 "agent_handle": made["agent_handle"]},
            )  # fmt: skip
        assert sent["delivery_results"]["recipients"] == ["w-2"]
        inbox_ids = {m["id"]: m["sender"] for m in await _inbox(on_b, "w-2", w2)}
        assert inbox_ids[sent["message_id"]] == "w-7"
        assert _p2_rows(a) == {}

        # No node serves p3: a NETWORK_ERROR naming it.
        unserved = await call_error(
            on_a, "bzzz_post", post | {"target_address": "bzzz://x@p3", "agent_id": "s-1"}
        )
        assert unserved["code"] == "NETWORK_ERROR"
        assert unserved["details"] == {"project": "p3"}
        assert "'p3'" in unserved["error"]

        out_a, in_b = await _forwarded(a, "out"), await _forwarded(b, "in")
        assert out_a["ok"] >= 8 and in_b["ok"] == out_a["ok"]
        assert out_a["not_served"] == 1
        assert (await _forwarded(b, "out")) == {}

        # Forged, unadmitted and replayed requests, sent with raw nats-py: refused, nothing done.
        before = await _inbox(on_b, "w-2", w2)
        await _forged_requests_are_refused(nats_url, a)
        assert await _inbox(on_b, "w-2", w2) == before
        assert (await _forwarded(b, "in"))["refused"] == 3


def _p2_rows(node: HttpNode) -> dict[str, int]:
    """How many rows of p2's content the node's own SQLite store holds, per table."""
    queries = {
        "agents": "SELECT count(*) FROM agents WHERE project = 'p2'",
        "inbox": "SELECT count(*) FROM inbox WHERE agent_id IN ('w-2', 's-2')",
        "messages": "SELECT count(*) FROM messages WHERE sender = 's-2'",
        "threads": "SELECT count(*) FROM threads WHERE creator = 'w-2'",
        "tasks": "SELECT count(*) FROM tasks WHERE agent_id = 'w-2'",
    }
    uri = f"file:{node.data_dir / 'bzzz.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        counts = {table: int(db.execute(sql).fetchone()[0]) for table, sql in queries.items()}
    return {table: n for table, n in counts.items() if n}


async def _forged_requests_are_refused(nats_url: str, admitted: HttpNode) -> None:
    nc = await nats.connect(nats_url.split(","))
    subject = forward_subject(NETWORK, "p2")
    post = {"target_address": "bzzz://w-2@p2", "message_type": "text", "content": {"x": 1}}

    async def ask(data: bytes, inbox: str) -> bytes:
        sub = await nc.subscribe(inbox, max_msgs=1)
        await nc.publish(subject, data, reply=inbox)
        return bytes((await sub.next_msg(timeout=5)).data)

    try:
        stranger, key = NodeIdentity.generate(), _key_of(admitted)
        inbox = nc.new_inbox()
        unadmitted = await ask(
            _wire(stranger).request(_body(stranger, "f-1", "post", post, inbox)), inbox
        )
        inbox = nc.new_inbox()
        clear = json.loads(
            ForwardWire(key, NETWORK, lambda *_: True).request(
                _body(key, "f-2", "post", post, inbox)
            )
        )
        clear["body"]["params"]["content"] = {"x": 2}  # changed after signing, sealed again
        forged = TEST_KEYRING.seal(
            json.dumps(clear).encode(), f"bzzz.fwd.request|{NETWORK}".encode()
        )
        bad_signature = await ask(forged.encode(), inbox)
        read = {"address": "bzzz://w-2@p2/inbox"}
        inbox = nc.new_inbox()
        genuine = _wire(key).request(_body(key, "f-3", "get", read, inbox))
        first = await ask(genuine, inbox)
        replayed = await ask(genuine, inbox)
    finally:
        await nc.close()
    assert json.loads(unadmitted) == {"refused": f"node {stranger.node_id} is not admitted"}
    assert json.loads(bad_signature) == {"refused": "bad signature"}
    assert _wire(key).result_of(first, "f-3")["success"] is True  # an admitted node's key
    with pytest.raises(BzzzError) as refused:
        _wire(key).result_of(replayed, "f-3")  # sealed and signed by the node that refused it
    assert refused.value.to_response()["code"] == "PERMISSION_DENIED"
    assert refused.value.details["reason"] == "replayed request id"


async def test_killing_the_serving_node_during_forwarded_posts_loses_no_acknowledged_post(
    make_node: NodeFactory,
) -> None:
    a = make_node("a", BZZZ_PROJECTS="p1", **R3)
    b = make_node("b", BZZZ_PROJECTS="p2", **R3)
    c = make_node("c", BZZZ_PROJECTS="p2", **R3)
    await start_network(a, b, c)
    owner = await _token(a, "owner", "p1", "p2")
    for node in (a, b, c):
        await _knows_token(node, owner)
    acknowledged: list[str] = []
    failed: list[dict[str, Any]] = []
    async with _mcp(a, owner) as on_a, _mcp(c, owner) as on_c:
        await _announce(on_a, "s-1", "p1")
        w2 = await _announce(on_c, "w-2", "p2")
        half_way = asyncio.Event()

        async def poster(worker: int) -> None:
            for n in range(15):
                result = await on_a.call_tool(
                    "bzzz_post",
                    {
                        "target_address": "bzzz://w-2@p2",
                        "message_type": "text",
                        "content": {"n": worker * 100 + n},
                        "agent_id": "s-1",
                    },
                )
                body = result.structured_content or {}
                if result.is_error:
                    failed.append(body)
                else:
                    acknowledged.append(body["message_id"])
                if len(acknowledged) >= 15:
                    half_way.set()

        async def killer() -> int:
            await half_way.wait()
            served_by_b = (await _forwarded(b, "in")).get("ok", 0)
            await b.kill()  # four posters in flight: whatever B was doing, it stops
            return served_by_b

        async with asyncio.timeout(120):
            *_, served_by_b = await asyncio.gather(*(poster(w) for w in range(4)), killer())

        async def stored() -> list[dict[str, Any]]:
            return await _inbox(on_c, "w-2", w2)

        held = await eventually(
            stored, lambda got: set(acknowledged) <= {m["id"] for m in got}, within=30
        )
        out_a = await _forwarded(a, "out")

    assert served_by_b > 0  # B did serve part of the stream before it was killed
    assert set(acknowledged) <= {m["id"] for m in held}
    numbers = [m["content"]["n"] for m in held]
    assert len(numbers) == len(set(numbers))  # a retried post is stored once
    assert len(acknowledged) + len(failed) == 60
    assert len(acknowledged) >= 56, failed  # retries go to C: at most an odd call fails
    assert out_a["ok"] == len(acknowledged)
