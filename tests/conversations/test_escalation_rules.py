"""Escalation rules: each condition, the design's two default rules, and firing once per thread."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from bzzz import domain
from bzzz.clock import ManualClock
from bzzz.config import default_escalation_rules
from bzzz.conversations.escalation import evaluate
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import PostInput

from .conftest import (
    NOTIFY,
    NodeFactory,
    announce,
    events_of,
    open_thread,
    rule,
    say,
    thread,
    thread_view,
    watch,
)


async def team(node: Node) -> str:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    return await open_thread(node, "arch", "dev", "rev")


def open_escalations(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in view["escalation_history"] if not e["resolved"]]


# --- the conditions, one by one, through a real node --------------------------------------------


async def test_thread_duration_fires_once_the_thread_is_old_enough(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    rules = [rule("old", [{"type": "thread_duration", "threshold": 3600}], NOTIFY)]
    async with make_node(rules) as node:
        thread_id = await team(node)
        sub = await watch(node, "thread_escalated")
        clock.advance(3599)
        before = await node.monitor.sweep()
        clock.advance(2)
        after = await node.monitor.sweep()
        view = await thread_view(node, thread_id)
        listing = await node.agents.get(LOCAL_CALLER, _get("bzzz://dev/threads"))
        events = await events_of(node, sub)

    assert (before.fired, after.fired) == (0, 1)
    assert view["status"] == "escalated"
    [listed] = listing["content"]["threads"]
    assert listed["escalation_history"] == view["escalation_history"]
    [escalation] = view["escalation_history"]
    assert escalation["rule"] == "old"
    assert escalation["threadId"] == thread_id
    assert "open for 60 min" in escalation["reason"]
    assert escalation["resolved"] is False
    [event] = events
    assert event["event_type"] == "thread_escalated"
    assert event["data"]["id"] == escalation["id"]
    assert event["data"]["actions"][0]["type"] == "notify_human"


async def test_no_progress_fires_when_nothing_moved_for_the_timeframe(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    rules = [rule("stuck", [{"type": "no_progress", "threshold": True, "timeframe": 600}], NOTIFY)]
    async with make_node(rules) as node:
        thread_id = await team(node)
        clock.advance(500)
        await say(node, "dev", thread_id, "We should use REST.", kind="decision")
        clock.advance(500)  # 1000 s old, but the decision was progress 500 s ago
        quiet = await node.monitor.sweep()
        await say(node, "rev", thread_id, "Chatter is not progress.")
        clock.advance(101)
        stuck = await node.monitor.sweep()

    assert (quiet.fired, stuck.fired) == (0, 1)


async def test_disagreement_count_fires_on_the_message_that_reaches_it(
    make_node: NodeFactory,
) -> None:
    rules = [rule("split", [{"type": "disagreement_count", "threshold": 2}], NOTIFY)]
    async with make_node(rules) as node:
        thread_id = await team(node)
        proposal = (await say(node, "arch", thread_id, "Use gRPC.", kind="decision"))["message_id"]
        await say(node, "dev", thread_id, "No: browsers.", reply_to=proposal, stance="disagree")
        one = await thread_view(node, thread_id)
        await say(node, "rev", thread_id, "No, REST.", reply_to=proposal, stance="disagree")
        two = await thread_view(node, thread_id)

    assert one["status"] == "active"
    assert two["status"] == "escalated"
    assert "2 disagreements" in two["escalation_history"][0]["reason"]


async def test_disagreements_outside_the_timeframe_do_not_count(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    rules = [
        rule("split", [{"type": "disagreement_count", "threshold": 2, "timeframe": 60}], NOTIFY)
    ]
    async with make_node(rules) as node:
        thread_id = await team(node)
        proposal = (await say(node, "arch", thread_id, "Use gRPC.", kind="decision"))["message_id"]
        await say(node, "dev", thread_id, "No.", reply_to=proposal, stance="disagree")
        # The posts are stamped by the wall clock; the rule looks from the hand-moved one.
        clock.advance(120)
        await say(node, "rev", thread_id, "No.", reply_to=proposal, stance="disagree")
        view = await thread_view(node, thread_id)

    assert view["status"] == "active"


async def test_error_rate_counts_failed_tasks_of_the_thread(make_node: NodeFactory) -> None:
    rules = [rule("failing", [{"type": "error_rate", "threshold": 0.5}], NOTIFY)]
    async with make_node(rules) as node:
        thread_id = await team(node)
        for task in ("build", "test"):
            await node.conversations.post(
                Caller("session-arch"),
                PostInput(
                    target_address="bzzz://dev",
                    message_type="task_assignment",
                    content={"task_type": task, "description": task},
                    thread_id=thread_id,
                ),
            )
        tasks = await node.agents.get(LOCAL_CALLER, _get("bzzz://dev/tasks"))
        [first, second] = [t["id"] for t in tasks["content"]["tasks"]]
        await _task_update(node, thread_id, "task_complete", first)
        passed = await thread_view(node, thread_id)
        await _task_update(node, thread_id, "task_failed", second)
        failed = await thread_view(node, thread_id)

    assert passed["status"] == "active"
    assert failed["status"] == "escalated"
    assert "1 of 2 tasks failed" in failed["escalation_history"][0]["reason"]


def _get(address: str) -> Any:
    from bzzz.schemas import GetInput

    return GetInput(address=address)


async def _task_update(node: Node, thread_id: str, kind: str, task_id: str) -> None:
    await node.conversations.post(
        Caller("session-dev"),
        PostInput(
            target_address="bzzz://arch",
            message_type=kind,
            content={"task_id": task_id, "error": "boom", "result": "ok"},
            thread_id=thread_id,
        ),
    )


async def test_no_resolution_fires_when_a_disagreement_stays_unresolved(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    conditions = [
        {"type": "disagreement_count", "threshold": 1},
        {"type": "no_resolution", "threshold": True, "timeframe": 600},
    ]
    async with make_node([rule("unresolved", conditions, NOTIFY)]) as node:
        thread_id = await team(node)
        proposal = (await say(node, "arch", thread_id, "Use gRPC.", kind="decision"))["message_id"]
        await say(node, "dev", thread_id, "No.", reply_to=proposal, stance="disagree")
        fresh = await thread_view(node, thread_id)
        clock.advance(601)
        report = await node.monitor.sweep()

    assert fresh["status"] == "active"
    assert report.fired == 1


# --- the rules as a whole -----------------------------------------------------------------------


def facts(**changes: Any) -> domain.ThreadFacts:
    start = domain.utcnow()
    base = domain.ThreadFacts(
        thread_id="thread-1",
        status="active",
        created_at=start,
        last_activity=start,
        last_progress_at=start,
        epoch_at=start,
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def test_a_rule_fires_only_when_all_its_conditions_hold() -> None:
    long_running, consensus_failure = default_escalation_rules()
    start = domain.utcnow()
    three = [start + timedelta(minutes=m) for m in (1, 2, 3)]

    young = evaluate([long_running], facts(), start + timedelta(hours=1))
    busy = evaluate(
        [long_running],
        facts(last_progress_at=start + timedelta(hours=2)),
        start + timedelta(hours=2, minutes=10),
    )
    stale = evaluate([long_running], facts(), start + timedelta(hours=2, seconds=1))
    split_fresh = evaluate(
        [consensus_failure], facts(disagreements=three), start + timedelta(minutes=30)
    )
    split_old = evaluate(
        [consensus_failure], facts(disagreements=three), start + timedelta(minutes=62)
    )
    two_only = evaluate(
        [consensus_failure], facts(disagreements=three[:2]), start + timedelta(hours=5)
    )

    assert (young, busy, split_fresh, two_only) == ([], [], [], [])
    assert [f.rule.name for f in stale] == ["Long Running Thread"]
    assert [f.rule.name for f in split_old] == ["Consensus Failure"]


@pytest.mark.parametrize("status", ["paused", "completed"])
def test_paused_and_completed_threads_never_escalate(status: str) -> None:
    rules = default_escalation_rules()
    start = domain.utcnow()

    assert evaluate(rules, facts(status=status), start + timedelta(days=3)) == []


async def test_the_default_rules_escalate_a_long_stalled_thread_and_a_consensus_failure(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node() as node:
        stalled = await team(node)
        split = await open_thread(node, "arch", "dev", "rev", topic="Storage")
        proposal = (await say(node, "arch", split, "Use Postgres.", kind="decision"))["message_id"]
        for agent in ("dev", "rev"):
            await say(node, agent, split, "No.", reply_to=proposal, stance="disagree")
        await say(node, "dev", split, "Still no.", reply_to=proposal, stance="disagree")
        clock.advance(3601)
        await node.monitor.sweep()
        split_view = await thread_view(node, split)
        stalled_early = await thread_view(node, stalled)
        clock.advance(3600)
        await node.monitor.sweep()
        stalled_view = await thread_view(node, stalled)

    assert [e["rule"] for e in split_view["escalation_history"]] == ["Consensus Failure"]
    # The thread's one architect is in it already: the architect's action turns to humans.
    split_actions = split_view["escalation_history"][0]["actions"]
    assert [(a["type"], a.get("requested")) for a in split_actions] == [
        ("notify_human", "escalate_to_architect"),
        ("create_decision_thread", None),
    ]
    assert split_actions[0]["result"]["escalated_to"] == "human"
    assert stalled_early["status"] == "active"
    assert [e["rule"] for e in stalled_view["escalation_history"]] == ["Long Running Thread"]
    assert [a["type"] for a in stalled_view["escalation_history"][0]["actions"]] == [
        "notify_human",
        "request_expert",
    ]


async def test_a_rule_fires_once_per_thread_until_resolved(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    rules = [rule("stuck", [{"type": "no_progress", "threshold": True, "timeframe": 600}], NOTIFY)]
    async with make_node(rules) as node:
        thread_id = await team(node)
        clock.advance(601)
        first = await node.monitor.sweep()
        await say(node, "dev", thread_id, "Anyone?")
        clock.advance(601)
        again = await node.monitor.sweep()
        once = await thread_view(node, thread_id)
        await thread(node, "arch", "resolve", thread_id=thread_id, reason="split the work")
        resolved = await thread_view(node, thread_id)
        after_resolution = await node.monitor.sweep()
        clock.advance(601)
        later = await node.monitor.sweep()
        final = await thread_view(node, thread_id)

    assert (first.fired, again.fired) == (1, 0)
    assert len(once["escalation_history"]) == 1
    assert resolved["status"] == "active"
    assert resolved["escalation_history"][0]["resolution"] == "split the work"
    assert resolved["decision_log"][-1]["kind"] == "resolution"
    assert (after_resolution.fired, later.fired) == (0, 1)
    assert [e["resolved"] for e in final["escalation_history"]] == [True, False]
    assert len(open_escalations(final)) == 1
