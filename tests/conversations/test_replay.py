"""Threads replayed from the signed log: ``bzzz_get`` with ``as_of``, and the replay's list."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bzzz.access.keys import principal_key
from bzzz.clock import ManualClock
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import ALL, LOCAL, Principal, Scope, principal
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput, validate_input

from .conftest import NodeFactory, announce, open_thread, rule, say, thread

ALPHA = principal("token:alpha", "token", ["alpha"], [ALL], Scope.WRITE, "alpha team")
BETA = principal("token:beta", "token", ["beta"], [ALL], Scope.WRITE, "beta team")
# Of the thread's project, but neither in the thread nor an admin of it.
BETA_READER = principal("token:bert", "token", ["beta"], [ALL], Scope.READ, "bert")


async def trio(node: Node) -> str:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    return await open_thread(node, "arch", "dev", "rev", topic="Storage engine")


async def read(
    node: Node, thread_id: str, as_of: Any = None, caller: Caller = LOCAL_CALLER
) -> dict[str, Any]:
    got = await node.agents.get(
        caller,
        GetInput(address=f"bzzz://*/threads/{thread_id}", max_history=50, as_of=as_of),
    )
    content: dict[str, Any] = got["content"]
    return content


async def decide(node: Node, clock: ManualClock, thread_id: str) -> str:
    """A decision every participant agrees with (the thread completes); its message id."""
    await say(node, "dev", thread_id, "Postgres has what reporting needs.")
    clock.advance(10)
    decision = await say(node, "arch", thread_id, "We use PostgreSQL.", kind="decision")
    clock.advance(10)
    await say(node, "dev", thread_id, "Yes.", reply_to=decision["message_id"], stance="agree")
    clock.advance(10)
    await say(node, "rev", thread_id, "Agreed.", reply_to=decision["message_id"], stance="agree")
    message_id: str = decision["message_id"]
    return message_id


async def test_a_thread_read_as_of_before_its_decision_shows_the_state_then(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        clock.advance(10)
        await decide(node, clock, thread_id)
        entries = [e.to_json() for e in await node.agents.history.entries(thread_id)]  # type: ignore[union-attr]
        posts = [e for e in entries if e["type"] == "message.posted"]
        # Just before the last agreement: by time, and by sequence.
        before_time = await read(node, thread_id, as_of=posts[2]["time"])
        before_seq = await read(node, thread_id, as_of=posts[3]["seq"] - 1)
        live = await read(node, thread_id)
        now = await read(node, thread_id, as_of=await node.bus.last_sequence())

    for then in (before_time, before_seq):
        thread = then["thread"]
        assert thread["status"] == "active"
        assert thread["consensus"] is None
        assert [m["content"] for m in thread["messages"]] == [
            "Postgres has what reporting needs.",
            "We use PostgreSQL.",
            "Yes.",
        ]
        [decision] = thread["decision_log"]
        assert decision["status"] == "proposed"
        assert sorted(decision["agreed"]) == ["arch", "dev"]
        assert [r["agent_id"] for r in thread["messages"][1]["reactions"]] == ["dev"]
    assert before_seq["as_of"]["sequence"] == posts[3]["seq"] - 1
    assert live["thread"]["status"] == "completed"
    assert now["thread"] == live["thread"]
    assert now["as_of"]["sequence"] == entries[-1]["seq"]


async def replay(node: Node, thread_id: str) -> list[dict[str, Any]]:
    return await node.agents.thread_envelopes(LOCAL_CALLER, thread_id)


async def test_the_replay_lists_every_envelope_of_the_thread_verified_in_log_order(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        await say(node, "arch", thread_id, "Unrelated to any thread?")
        await thread(node, "dev", "pause", thread_id=thread_id, reason="lunch")
        await thread(node, "dev", "resume", thread_id=thread_id)
        await decide(node, clock, thread_id)
        entries = await replay(node, thread_id)

    assert [e["type"] for e in entries] == [
        "thread.created",
        "message.posted",
        "thread.status",
        "thread.status",
        *["message.posted"] * 4,
        "slurp.generated",
    ]
    assert all(e["verified"] for e in entries), entries
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)
    assert {e["origin"] for e in entries} == {node.node_id}
    assert {e["signed_by"] for e in entries} == {node.identity.public_key_b64}
    assert all(e["stand_in"] is None and e["time"] for e in entries)


async def test_a_tampered_copy_on_the_log_shows_as_not_verified_and_changes_no_replay(
    make_node: NodeFactory, memory_bus: InMemoryBus
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        await thread(node, "dev", "pause", thread_id=thread_id, reason="lunch")
        [pause] = [m for m in await memory_bus.read_kind("thread", thread_id)][1:]
        forged = json.loads(pause.data)
        forged["ts"] = "2020-01-01T00:00:00+00:00"  # its signature no longer covers it
        await memory_bus.store(pause.subject, json.dumps(forged).encode(), "forged-copy")
        await node.projector.wait_for_sequence(await memory_bus.last_sequence(), within=5)
        entries = await replay(node, thread_id)
        then = await read(node, thread_id, as_of=entries[-1]["seq"])

    assert [(e["type"], e["verified"], e["problem"]) for e in entries] == [
        ("thread.created", True, None),
        ("thread.status", True, None),
        ("thread.status", False, "bad_signature"),
    ]
    assert entries[2]["envelope_id"] == entries[1]["envelope_id"]
    assert entries[2]["time"] == "2020-01-01T00:00:00+00:00"
    assert then["thread"]["status"] == "paused"


async def test_posts_erased_from_the_log_appear_as_stand_ins_and_the_replay_reaches_todays_state(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        await decide(node, clock, thread_id)
        await node.retention.forget(LOCAL, "dev")
        entries = await replay(node, thread_id)
        live = await read(node, thread_id)
        now = await read(node, thread_id, as_of=await node.bus.last_sequence())

    posts = [e for e in entries if e["type"] == "message.posted"]
    stand_ins = [e for e in posts if e["stand_in"] is not None]
    assert len(stand_ins) == 2  # dev's two posts
    assert all(e["verified"] for e in entries)
    assert {e["stand_in"]["reason"] for e in stand_ins} == {"erasure"}
    assert all("content" in e["stand_in"]["removed"] for e in stand_ins)
    assert [e["stand_in"] is None for e in posts] == [False, True, False, True]
    assert now["thread"] == live["thread"]


async def test_a_thread_before_it_existed_or_a_bad_as_of_is_refused(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        [created] = (await replay(node, thread_id))[:1]
        with pytest.raises(ThreadNotFound):
            await read(node, thread_id, as_of=created["seq"] - 1)
        with pytest.raises(ThreadNotFound):
            await read(node, thread_id, as_of="2001-01-01T00:00:00Z")
        with pytest.raises(ThreadNotFound):
            await read(node, "thread-01M8TGJN0XZYDJ3TVSVY8HW5Q1", as_of=1)
        with pytest.raises(InvalidParameters):
            await node.agents.get(
                LOCAL_CALLER, GetInput(address="bzzz://arch", as_of=created["seq"])
            )
    for bad in ("yesterday", 0, -3, "2026-13-01T00:00:00Z", True, "9" * 70, 2**64, 1.5):
        with pytest.raises(InvalidParameters, match="as_of"):
            validate_input(GetInput, {"address": f"bzzz://*/threads/{thread_id}", "as_of": bad})
    assert validate_input(GetInput, {"address": "bzzz://a", "as_of": " 42 "}).as_of == 42
    naive = validate_input(GetInput, {"address": "bzzz://a", "as_of": "2026-12-01T10:00:00"})
    assert naive.as_of == datetime(2026, 12, 1, 10, tzinfo=UTC)


def as_(who: Principal) -> Caller:
    return Caller(principal_key(who), who)


async def test_a_principal_of_another_project_gets_thread_not_found_as_of_too(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        await node.agents.announce(
            as_(BETA), AnnounceInput(agent_id="beta-lead", role="dev", project="beta")
        )
        await node.agents.announce(
            as_(BETA), AnnounceInput(agent_id="beta-dev", role="dev", project="beta")
        )
        await node.agents.announce(
            as_(ALPHA), AnnounceInput(agent_id="alpha-arch", role="arch", project="alpha")
        )
        created = await node.conversations.thread(
            as_(BETA),
            ThreadInput(action="create", topic="beta secrets", participants=["beta-dev"],
                        agent_id="beta-lead"),
        )  # fmt: skip
        thread_id = created["thread_id"]
        seq = await node.bus.last_sequence()
        own = await read(node, thread_id, as_of=seq, caller=as_(BETA))
        with pytest.raises(ThreadNotFound):
            await read(node, thread_id, as_of=seq, caller=as_(ALPHA))
        with pytest.raises(ThreadNotFound):
            await node.agents.thread_envelopes(as_(ALPHA), thread_id)
        # A read token of beta is the team's: it reads the project's thread as of then too.
        team = await read(node, thread_id, as_of=seq, caller=as_(BETA_READER))

    assert own["thread"]["topic"] == "beta secrets"
    assert team["thread"]["topic"] == "beta secrets"


async def test_as_of_now_equals_the_live_thread_with_a_task_updated_in_it_on_either_store(
    store_node: Node,
) -> None:
    node = store_node
    thread_id = await trio(node)
    assigned = await node.conversations.post(
        Caller("session-arch"),
        PostInput(
            target_address="bzzz://dev",
            message_type="task_assignment",
            content={"task_type": "benchmark", "description": "measure the store"},
        ),
    )
    task_id = assigned["tasks"]["dev"]
    progress = {"task_id": task_id, "text": "half way"}
    await node.conversations.post(
        Caller("session-dev"),
        PostInput(message_type="task_progress", content=progress, thread_id=thread_id),
    )
    await say(node, "rev", thread_id, "Good.")
    live = await read(node, thread_id)
    now = await read(node, thread_id, as_of=await node.bus.last_sequence())

    assert [m["messageType"] for m in live["thread"]["messages"]] == ["task_progress", "text"]
    assert now["thread"] == live["thread"]


async def test_a_signed_envelope_the_appliers_refuse_is_refused_in_the_replay_too(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        await say(node, "dev", thread_id, "Before.")
        bad = {"thread_id": thread_id, "agent_id": "dev", "action": "explode"}
        refused = await node.log.emit("thread.status", "thread", thread_id, bad)
        await say(node, "rev", thread_id, "After.")
        live = await read(node, thread_id)
        now = await read(node, thread_id, as_of=await node.bus.last_sequence())
        entries = await replay(node, thread_id)

    assert refused == {"ok": False, "reason": "bad payload"}
    assert [e["type"] for e in entries][-2:] == ["thread.status", "message.posted"]
    assert all(e["verified"] for e in entries)
    assert [m["content"] for m in now["thread"]["messages"]] == ["Before.", "After."]
    assert now["thread"] == live["thread"]


async def test_as_of_shows_an_escalation_open_before_it_was_resolved(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    stuck = [{"type": "no_progress", "threshold": True, "timeframe": 600}]
    async with make_node([rule("stuck", stuck, [{"type": "escalate_to_architect"}])]) as node:
        thread_id = await trio(node)
        clock.advance(601)
        fired = await node.monitor.sweep()
        escalated_at = await node.bus.last_sequence()
        await thread(node, "arch", "resolve", thread_id=thread_id, reason="we move on")
        then = await read(node, thread_id, as_of=escalated_at)
        live = await read(node, thread_id)

    assert fired.fired == 1
    assert then["thread"]["status"] == "escalated"
    assert [e["resolved"] for e in then["thread"]["escalation_history"]] == [False]
    assert live["thread"]["status"] == "active"
    assert [e["resolved"] for e in live["thread"]["escalation_history"]] == [True]


async def test_posts_retention_purged_appear_as_stand_ins_keeping_the_decision(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node(retention={"messages_days": 1.0}) as node:
        thread_id = await trio(node)
        await decide(node, clock, thread_id)
        clock.advance(2 * 86_400)
        await node.retention.run(LOCAL)
        entries = await replay(node, thread_id)
        live = await read(node, thread_id)
        now = await read(node, thread_id, as_of=await node.bus.last_sequence())

    posts = [e for e in entries if e["type"] == "message.posted"]
    assert len(posts) == 4
    assert {(e["stand_in"] or {}).get("reason") for e in posts} == {"retention"}
    assert all(e["verified"] for e in posts)
    assert now["thread"]["decision_log"][0]["text"] == "We use PostgreSQL."
    assert now["thread"]["status"] == "completed"
    assert now["thread"] == live["thread"]
