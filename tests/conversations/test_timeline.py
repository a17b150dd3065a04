"""A thread as it happened: its log read back as joins, leaves, escalations raised and resolved
(who, why), decisions, stances and messages, in order; the escalation's priority by name."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.clock import ManualClock
from bzzz.errors import ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.principal import Principal, Scope

from .conftest import NodeFactory, announce, open_thread, rule, say, thread

STUCK = [{"type": "no_progress", "threshold": True, "timeframe": 600}]
HIGH = [{"type": "notify_human", "target": "project_manager", "priority": "high"}]


def _what(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each entry that happened, as (kind, who, what it names)."""
    shown = []
    for e in entries:
        if e["applied"] is False:
            continue
        kind = e["kind"]
        if kind in ("joined", "left"):
            shown.append((kind, e["agent"]))
        elif kind in ("message", "decision", "stance"):
            shown.append((kind, e["by"], e["message_id"]))
        elif kind == "escalated":
            shown.append((kind, e["rule"], e["priority"]))
        elif kind in ("resolved", "closed", "paused", "resumed"):
            shown.append((kind, e["by"], e["reason"], tuple(e.get("escalations", ()))))
        else:
            shown.append((kind,))
    return shown


async def test_the_timeline_interleaves_what_happened_with_the_messages_in_log_order(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node([rule("stuck", STUCK, HIGH)]) as node:
        for agent, role in (("arch", "architect"), ("dev", "developer"), ("qa", "tester")):
            await announce(node, agent, role)
        thread_id = await open_thread(node, "arch", "dev")
        first = (await say(node, "dev", thread_id, "Which queue?"))["message_id"]
        await thread(node, "qa", "join", thread_id=thread_id)
        clock.advance(601)
        [escalation_id] = await node.escalations.check_all()
        await thread(node, "arch", "resolve", thread_id=thread_id, reason="we pick NATS")
        decision = (await say(node, "arch", thread_id, "NATS.", kind="decision"))["message_id"]
        stance = await say(node, "dev", thread_id, "Yes", reply_to=decision, stance="agree")
        await thread(node, "qa", "leave", thread_id=thread_id)
        entries = await node.timeline.timeline(LOCAL_CALLER, thread_id)
        escalations = (await node.escalations.list())[0].to_json()
        upto = await node.timeline.timeline(LOCAL_CALLER, thread_id, as_of=entries[2]["seq"])

    assert _what(entries) == [
        ("created",),
        ("message", "dev", first),
        ("joined", "qa"),
        ("escalated", "stuck", "high"),
        ("resolved", "arch", "we pick NATS", (escalation_id,)),
        ("decision", "arch", decision),
        ("stance", "dev", stance["message_id"]),
        ("left", "qa"),
    ]
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)
    assert all(e["verified"] for e in entries)
    assert escalations["priority"] == "high" and escalations["rule_priority"] == 0
    assert [e["seq"] for e in upto] == [e["seq"] for e in entries[:3]]


async def test_a_consensus_and_a_close_say_which_escalations_they_ended(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node([rule("stuck", STUCK, HIGH)]) as node:
        await announce(node, "arch", "architect")
        await announce(node, "dev", "developer")
        thread_id = await open_thread(node, "arch", "dev")
        clock.advance(601)
        [escalation_id] = await node.escalations.check_all()
        decision = (await say(node, "arch", thread_id, "NATS.", kind="decision"))["message_id"]
        await say(node, "dev", thread_id, "Yes", reply_to=decision, stance="agree")
        entries = await node.timeline.timeline(LOCAL_CALLER, thread_id)

    [reached] = [e for e in entries if e["kind"] == "consensus"]
    assert reached["escalations"] == [escalation_id]
    assert reached["decision_message_id"] == decision
    assert reached["agents"] == ["arch", "dev"]


async def test_only_readers_of_the_thread_read_its_timeline(make_node: NodeFactory) -> None:
    async with make_node() as node:
        await announce(node, "arch", "architect", project="shop")
        await announce(node, "dev", "developer", project="shop")
        thread_id = await open_thread(node, "arch", "dev")
        stranger = Caller("s", _token("web-team", "web"))
        shop = Caller("s", _token("shop-viewer", "shop"))
        with pytest.raises(ThreadNotFound):
            await node.timeline.timeline(stranger, thread_id)
        seen = await node.timeline.timeline(shop, thread_id)
        with pytest.raises(ThreadNotFound):
            await node.timeline.timeline(shop, "thread-nope")

    assert [e["kind"] for e in seen] == ["created"]


def _token(name: str, project: str) -> Principal:
    return Principal(name, "token", frozenset({project}), frozenset({"*"}), Scope.READ)
