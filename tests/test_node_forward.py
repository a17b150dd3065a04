"""The front door on one in-memory bus: a p1 node answers p2's calls as the p2 node does."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from admitted import admit

from bzzz.access.keys import STATELESS
from bzzz.audit import reading
from bzzz.config import Settings, load_settings
from bzzz.errors import BzzzError, NotServed
from bzzz.eventlog import Caller
from bzzz.metrics.collector import forwarding_family
from bzzz.network.forward import (
    QUEUE,
    ForwardRequest,
    ForwardWire,
    WireCaller,
    WirePrincipal,
    forward_subject,
)
from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import ANONYMOUS, Principal, Scope
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput


def _who(name: str, *projects: str) -> Caller:
    principal = Principal(
        f"token:{name}", "token", frozenset(projects), frozenset({"*"}), Scope.WRITE, name
    )
    return Caller(f"principal-{name}", principal)


OWNER = _who("owner", "p1", "p2")
P1_ONLY = _who("p1only", "p1")


def _settings(tmp_path: Path, name: str, projects: str) -> Settings:
    return load_settings(
        environ={},
        overrides={"node": {"data_dir": str(tmp_path / name)}, "bzzz": {"projects": [projects]}},
    )


class FakeDirectory:
    """The network's agent directory, as a test sets it."""

    def __init__(self, where: dict[str, str]) -> None:
        self.where = where
        self.asked: list[str] = []

    async def project_of(self, agent_id: str) -> str | None:
        self.asked.append(agent_id)
        return self.where.get(agent_id)


@pytest.fixture
def directory() -> FakeDirectory:
    # What the network's agent directory says of p2's agents (the p1 node stores none of them).
    return FakeDirectory({"w-2": "p2", "w-3": "p2", "w-9": "p2"})


@pytest.fixture
async def nodes(tmp_path: Path, directory: FakeDirectory) -> AsyncIterator[tuple[Node, Node]]:
    bus = InMemoryBus()
    a = Node(_settings(tmp_path, "a", "p1"), bus=bus, agent_projects=directory)
    async with a, Node(_settings(tmp_path, "b", "p2"), bus=bus) as b:
        await admit(a, b)
        await a.agents.announce(OWNER, AnnounceInput(agent_id="s-1", role="dev", project="p1"))
        await b.agents.announce(OWNER, AnnounceInput(agent_id="w-2", role="dev", project="p2"))
        await b.agents.announce(OWNER, AnnounceInput(agent_id="w-3", role="dev", project="p2"))
        yield a, b


def _same(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "retrieved_at"}


async def _error(call: Any) -> dict[str, Any]:
    with pytest.raises(BzzzError) as raised:
        await call
    shown = raised.value.to_response()
    shown.pop("timestamp")
    return shown


async def test_a_post_and_reads_for_p2_through_the_p1_node_are_answered_by_the_p2_node(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    post = PostInput(
        target_address="bzzz://w-2@p2",
        message_type="task_assignment",
        content={"description": "ship it"},
        agent_id="s-1",
    )
    sent = await a.front.post(OWNER, post)
    inbox = GetInput(address="bzzz://w-2@p2/inbox")
    tasks = GetInput(address="bzzz://w-2/tasks")  # no project: the directory knows w-2's

    assert sent["delivery_results"]["recipients"] == ["w-2"]
    assert _same(await a.front.get(OWNER, inbox)) == _same(await b.front.get(OWNER, inbox))
    assert _same(await a.front.get(OWNER, tasks)) == _same(await b.front.get(OWNER, tasks))
    [message] = (await b.front.get(OWNER, inbox))["content"]["messages"]
    assert message["sender"] == "s-1"
    assert a.front.counts["out"]["ok"] == 3
    assert b.front.counts["in"]["ok"] == 3
    assert a.front.counts["in"]["ok"] == 0


async def test_a_thread_of_p2_reads_the_same_through_the_p1_node(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    created = await b.conversations.thread(
        OWNER,
        ThreadInput(action="create", participants=["w-3"], topic="plan", agent_id="w-2"),
    )
    thread_id = created["thread_id"]
    read = GetInput(address=f"bzzz://*@p2/threads/{thread_id}")
    # No project: the directory knows the project of the agent the address names.
    bare = GetInput(address=f"bzzz://w-3/threads/{thread_id}")

    assert _same(await a.front.get(OWNER, read)) == _same(await b.front.get(OWNER, read))
    assert _same(await a.front.get(OWNER, bare)) == _same(await b.front.get(OWNER, bare))
    assert a.front.counts["out"]["ok"] == 2


async def test_a_principal_of_p1_only_is_refused_through_the_p1_node_as_on_the_p2_node(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    inbox = GetInput(address="bzzz://w-2@p2/inbox")
    post = PostInput(target_address="bzzz://w-2@p2", message_type="text", content={"t": 1})
    await a.agents.announce(P1_ONLY, AnnounceInput(agent_id="s-5", role="dev", project="p1"))

    refused_read = await _error(a.front.get(P1_ONLY, inbox))
    assert refused_read == await _error(b.front.get(P1_ONLY, inbox))
    assert refused_read["code"] == "AGENT_NOT_FOUND"
    refused_post = await _error(a.front.post(P1_ONLY, post))
    assert refused_post["code"] == "AGENT_NOT_FOUND"  # p2 is not shown to it: no such agent
    # On the p2 node itself the caller acts as no agent (its s-5 lives in p1): refused too.
    assert (await _error(b.front.post(P1_ONLY, post)))["code"] == "INVALID_PARAMETERS"
    assert b.front.counts["in"]["error"] == 2
    assert (await b.front.get(OWNER, inbox))["content"]["messages"] == []


async def test_a_project_no_node_serves_is_a_network_error_naming_it(
    nodes: tuple[Node, Node],
) -> None:
    a, _ = nodes
    post = PostInput(target_address="bzzz://x@p3", message_type="text", content={}, agent_id="s-1")
    with pytest.raises(NotServed) as raised:
        await a.front.post(OWNER, post)
    assert raised.value.to_response()["code"] == "NETWORK_ERROR"
    assert raised.value.details == {"project": "p3"}
    assert "'p3'" in raised.value.message


async def test_an_agent_the_store_does_not_hold_is_found_in_the_directory(
    nodes: tuple[Node, Node], directory: FakeDirectory
) -> None:
    a, b = nodes
    refused = await _error(a.front.get(OWNER, GetInput(address="bzzz://w-9/inbox")))

    assert directory.asked == ["w-9"]
    assert refused["code"] == "AGENT_NOT_FOUND"  # as the p2 node answers: it has none either
    assert b.front.counts["in"]["error"] == 1


async def test_a_forwarded_call_is_on_the_serving_nodes_audit_trail(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    await a.front.get(OWNER, GetInput(address="bzzz://w-2@p2"))
    await b.audit.flush()
    records = await reading.records(b.db, reading.Filter(node_id=b.node_id))
    forwarded = [r for r in records if r.action.startswith("forwarded:")]
    assert [(r.action, r.principal, r.outcome) for r in forwarded] == [
        (f"forwarded:get:{a.node_id}", "token:owner", "ok")
    ]
    assert a.status()["forwarding"]["out"] == {"ok": 1}


def _forwarded_post(a: Node, request_id: str, key: str, reply: str = "_INBOX.a.1") -> bytes:
    post = PostInput(target_address="bzzz://w-2@p2", message_type="text", content={"n": 1})
    body = ForwardRequest(
        id=request_id,
        network=a.network,
        project="p2",
        op="post",
        params=post.model_dump(mode="json"),
        caller=WireCaller(session_id=OWNER.session_id, principal=WirePrincipal.of(OWNER.principal)),
        sender="s-1",
        key=key,
        reply=reply,
        origin=a.node_id,
        origin_key=a.identity.public_key_b64,
        at=time.time(),
    )
    return a.front.wire.request(body)


async def test_a_post_retried_under_a_new_request_id_is_stored_once(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    key = "msg-01J00000000000000000000000"
    reply = "_INBOX.a.1"
    first = a.front.wire.result_of(
        await b.front.answer(_forwarded_post(a, "r-1", key), reply), "r-1"
    )
    again = a.front.wire.result_of(
        await b.front.answer(_forwarded_post(a, "r-2", key), reply), "r-2"
    )
    inbox = await b.front.get(OWNER, GetInput(address="bzzz://w-2@p2/inbox"))

    assert first["message_id"] == again["message_id"] == key
    assert again["delivery_results"]["recipients"] == ["w-2"]
    assert [m["id"] for m in inbox["content"]["messages"]] == [key]
    replayed = _refused(a, await b.front.answer(_forwarded_post(a, "r-2", key), reply), "r-2")
    assert replayed.details["reason"] == "replayed request id"


def _refused(a: Node, data: bytes, request_id: str) -> BzzzError:
    with pytest.raises(BzzzError) as raised:
        a.front.wire.result_of(data, request_id)
    return raised.value


async def test_forwarded_calls_are_counted_in_the_metrics(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    await a.front.get(OWNER, GetInput(address="bzzz://w-2@p2"))
    with pytest.raises(NotServed):
        await a.front.get(OWNER, GetInput(address="bzzz://w-2@p3"))
    samples = {
        (s.labels["direction"], s.labels["outcome"]): s.value
        for node in (a, b)
        for s in forwarding_family(node.status()["forwarding"]).samples
    }
    assert samples == {("out", "ok"): 1, ("out", "not_served"): 1, ("in", "ok"): 1}


async def test_a_node_that_requires_credentials_refuses_a_forwarded_anonymous_caller(
    nodes: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = nodes
    inbox = GetInput(address="bzzz://w-2@p2")
    anonymous = Caller("conn-1", ANONYMOUS)  # every grant on a node that takes no credential
    assert (await a.front.get(anonymous, inbox))["success"] is True
    monkeypatch.setattr(b.front, "_auth_required", lambda: True)

    refused = await _error(a.front.get(anonymous, inbox))
    assert refused["code"] == "PERMISSION_DENIED"
    assert refused["details"] == {"missing": "credential", "forwarded": True}
    assert (await a.front.get(OWNER, inbox))["success"] is True  # a token holder still reads


async def test_a_member_that_hangs_or_forges_its_answer_is_passed_over_for_another(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    # Holds the NATS login and even the network key (it opens the request), but is not admitted.
    intruder = ForwardWire(NodeIdentity.generate(), a.network, lambda *_: True, a.keyring)
    hits: Counter[str] = Counter()

    async def forge(data: bytes, reply: str) -> bytes:
        hits["forge"] += 1
        request = intruder.open_request(data)
        return intruder.answer_ok(request.id, {"success": True, "forged": True})

    async def hang(data: bytes, reply: str) -> bytes:
        hits["hang"] += 1
        await asyncio.Event().wait()
        return b""

    # The queue group picks a member at random: with two bad members of three, 30 attempts
    # all miss B once in 190,000 calls. Calls go on until each bad member was picked.
    a.front.routing = replace(a.front.routing, within=1.0, attempts=30)
    subject = forward_subject(a.network, "p2")
    served = [
        asyncio.create_task(a.bus.serve_requests([subject], QUEUE, handler))
        for handler in (forge, hang)
    ]
    got: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(60):
            while len(got) < 3 or not (hits["forge"] and hits["hang"]):
                got.append(await a.front.get(OWNER, GetInput(address="bzzz://w-2@p2")))
    finally:
        for task in served:
            task.cancel()
        await asyncio.gather(*served, return_exceptions=True)

    assert all("forged" not in answer and answer["success"] for answer in got)
    assert a.front.counts["out"]["retried"] >= hits["forge"] + hits["hang"] >= 2
    assert a.front.counts["out"]["ok"] == b.front.counts["in"]["ok"] == len(got)


async def test_a_client_without_a_session_acts_as_a_p2_agent_through_the_p1_node(
    nodes: tuple[Node, Node], directory: FakeDirectory
) -> None:
    a, b = nodes
    made = await a.front.announce(
        Caller(STATELESS, OWNER.principal), AnnounceInput(agent_id="w-5", role="dev", project="p2")
    )
    # The agent lives on B (the node serving p2), on its lease; A holds nothing of it.
    agent = b.agents.directory.get("w-5")
    assert agent is not None and agent.online and a.agents.directory.get("w-5") is None
    # A knows where it sent the announcement before the network's directory lists the agent.
    assert "w-5" not in directory.where
    w5 = Caller(STATELESS, OWNER.principal, made["agent_handle"])

    def text(target: str, n: int) -> PostInput:
        return PostInput(target_address=target, message_type="text", content={"n": n})

    to_p2 = await a.front.post(w5, text("bzzz://w-2@p2", 1))
    to_p1 = await a.front.post(w5, text("bzzz://s-1@p1", 2))  # A → B (w-5's) → A (s-1's)
    created = await a.front.thread(
        w5, ThreadInput(action="create", participants=["w-2"], topic="plan")
    )

    assert to_p2["delivery_results"]["recipients"] == ["w-2"]
    assert to_p1["delivery_results"]["recipients"] == ["s-1"]
    [on_b] = (await b.front.get(OWNER, GetInput(address="bzzz://w-2@p2/inbox")))["content"][
        "messages"
    ]
    [on_a] = (await a.front.get(OWNER, GetInput(address="bzzz://s-1@p1/inbox")))["content"][
        "messages"
    ]
    assert (on_b["sender"], on_b["id"]) == ("w-5", to_p2["message_id"])
    assert (on_a["sender"], on_a["id"]) == ("w-5", to_p1["message_id"])
    thread = await b.front.get(
        OWNER, GetInput(address=f"bzzz://*@p2/threads/{created['thread_id']}")
    )
    assert thread["content"]["thread"]["creator"] == "w-5"

    # A handle that is not w-5's: refused through A exactly as on B, nothing posted.
    forged = Caller(STATELESS, OWNER.principal, "w-5:not-its-secret")
    refused = await _error(a.front.post(forged, text("bzzz://w-2@p2", 3)))
    assert refused == await _error(b.front.post(forged, text("bzzz://w-2@p2", 3)))
    assert refused["code"] == "PERMISSION_DENIED"
    # A session's agent lives where the session is: of p2 on A, NotServed.
    with pytest.raises(NotServed):
        await a.front.announce(
            Caller("session-9", OWNER.principal),
            AnnounceInput(agent_id="w-6", role="dev", project="p2"),
        )
    inbox = (await b.front.get(OWNER, GetInput(address="bzzz://w-2@p2/inbox")))["content"]
    assert len(inbox["messages"]) == 1


async def test_a_node_the_serving_nodes_do_not_admit_is_told_why_its_calls_went_unanswered(
    nodes: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = nodes
    monkeypatch.setattr(b.front.wire, "admits", lambda key, node_id: node_id != a.node_id)
    refused = await _error(a.front.get(OWNER, GetInput(address="bzzz://w-2@p2")))

    assert refused["code"] == "NETWORK_ERROR"
    assert refused["details"]["last_answer"] == (
        f"the answer did not open (refused: node {a.node_id} is not admitted)"
    )
    assert b.front.counts["in"] == {"refused": a.front.routing.attempts}
    assert a.front.counts["out"] == {"retried": 3, "unanswered": 1}
