"""A thread's lifecycle: pause, resume, resolve, close, and closing idle threads."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from bzzz.clock import ManualClock
from bzzz.config import Settings
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.mcp.descriptions import THREAD
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

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


async def pair(node: Node) -> str:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "outsider", "developer")
    return await open_thread(node, "arch", "dev")


async def test_a_paused_thread_takes_no_messages_until_resumed(make_node: NodeFactory) -> None:
    async with make_node() as node:
        thread_id = await pair(node)
        sub = await watch(node, "thread_status")
        paused = await thread(node, "dev", "pause", thread_id=thread_id, reason="waiting on legal")
        with pytest.raises(InvalidParameters) as refused:
            await say(node, "arch", thread_id, "Hello?")
        resumed = await thread(node, "arch", "resume", thread_id=thread_id)
        await say(node, "arch", thread_id, "Back to it.")
        events = await events_of(node, sub)

    assert paused["action"] == "pause"
    assert paused["result"]["status"] == "paused"
    assert "paused; resume it first" in refused.value.message
    assert resumed["result"]["status"] == "active"
    assert [(e["data"]["action"], e["data"]["status"]) for e in events] == [
        ("pause", "paused"),
        ("resume", "active"),
    ]
    assert events[0]["data"]["reason"] == "waiting on legal"


async def test_close_completes_the_thread_and_resolves_its_escalations(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    stuck = [rule("stuck", [{"type": "no_progress", "threshold": True, "timeframe": 60}], NOTIFY)]
    async with make_node(stuck) as node:
        thread_id = await pair(node)
        clock.advance(61)
        await node.escalations.check_all()
        closed = await thread(node, "arch", "close", thread_id=thread_id, reason="moot")
        with pytest.raises(InvalidParameters):
            await say(node, "dev", thread_id, "Wait!")

    assert closed["result"]["status"] == "completed"
    [escalation] = closed["result"]["escalation_history"]
    assert (escalation["resolved"], escalation["resolution"]) == (True, "moot")


async def test_a_paused_escalated_thread_resumes_escalated(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    stuck = [rule("stuck", [{"type": "no_progress", "threshold": True, "timeframe": 60}], NOTIFY)]
    async with make_node(stuck) as node:
        thread_id = await pair(node)
        clock.advance(61)
        await node.escalations.check_all()
        await thread(node, "arch", "pause", thread_id=thread_id)
        resumed = await thread(node, "arch", "resume", thread_id=thread_id)

    assert resumed["result"]["status"] == "escalated"


async def test_idle_threads_close_after_the_default_timeout_but_escalated_ones_wait(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    rules = [rule("split", [{"type": "disagreement_count", "threshold": 1}], NOTIFY)]
    async with make_node(rules) as node:
        node.conversations.lifecycle._idle_timeout = 600
        quiet = await pair(node)
        busy = await open_thread(node, "arch", "dev", topic="Busy")
        split = await open_thread(node, "arch", "dev", topic="Split")
        proposal = (await say(node, "arch", split, "Go.", kind="decision"))["message_id"]
        await say(node, "dev", split, "No.", reply_to=proposal, stance="disagree")
        clock.advance(300)
        await say(node, "dev", busy, "Still here.")
        clock.advance(301)
        report = await node.monitor.sweep()
        views = {t: await thread_view(node, t) for t in (quiet, busy, split)}

    assert report.closed == 1
    assert views[quiet]["status"] == "completed"
    assert views[busy]["status"] == "active"
    assert views[split]["status"] == "escalated"


async def test_a_message_that_lands_before_the_idle_close_keeps_the_thread_open(
    make_node: NodeFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with make_node() as node:
        lifecycle = node.conversations.lifecycle
        lifecycle._idle_timeout = 600
        thread_id = await pair(node)
        clock.advance(601)
        log = lifecycle._log
        emit = log.emit
        raced: list[str] = []

        async def message_first(type_: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
            # The monitor has found the thread idle; a message reaches the log before its close.
            if type_ == "thread.status" and not raced:
                raced.append((await say(node, "dev", thread_id, "Still here!"))["message_id"])
            outcome: dict[str, Any] = await emit(type_, *args, **kwargs)
            return outcome

        monkeypatch.setattr(log, "emit", message_first)
        closed = await lifecycle.close_idle()
        monkeypatch.setattr(log, "emit", emit)
        view = await thread_view(node, thread_id)
        clock.advance(601)
        later = await lifecycle.close_idle()

    assert len(raced) == 1
    assert closed == []
    assert view["status"] == "active"
    assert [m["content"] for m in view["messages"]] == ["Still here!"]
    assert later == [thread_id]


async def test_the_node_monitor_closes_idle_threads_on_its_own(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    clock = ManualClock()
    settings.conversation.default_timeout = 60
    settings.escalation.monitor_interval = 0.05
    closed = asyncio.Event()

    async with Node(settings, bus=memory_bus, clock=clock) as node:

        async def on_events(matched: Any) -> None:
            if any(ev.type == "thread_status" for _sub, ev in matched):
                closed.set()

        node.projector.add_listener(on_events)
        await watch(node, "thread_status")
        thread_id = await pair(node)
        clock.advance(61)
        async with asyncio.timeout(5):
            await closed.wait()
        view = await thread_view(node, thread_id)

    assert view["status"] == "completed"


# --- every new action, with bad input ------------------------------------------------------------


@pytest.mark.parametrize("action", ["pause", "resume", "resolve", "close"])
async def test_a_status_action_needs_a_thread_id(make_node: NodeFactory, action: str) -> None:
    async with make_node() as node:
        await pair(node)
        with pytest.raises(InvalidParameters) as caught:
            await thread(node, "arch", action)

    assert caught.value.details["missing"] == ["thread_id"]


@pytest.mark.parametrize("action", ["pause", "resume", "resolve", "close"])
async def test_a_status_action_on_an_unknown_thread_is_thread_not_found(
    make_node: NodeFactory, action: str
) -> None:
    async with make_node() as node:
        await pair(node)
        with pytest.raises(ThreadNotFound):
            await thread(node, "arch", action, thread_id="thread-nope")


@pytest.mark.parametrize("action", ["pause", "resume", "resolve", "close"])
async def test_only_participants_change_a_threads_status(
    make_node: NodeFactory, action: str
) -> None:
    async with make_node() as node:
        thread_id = await pair(node)
        with pytest.raises(InvalidParameters) as caught:
            await thread(node, "outsider", action, thread_id=thread_id)

    assert "not a participant" in caught.value.message


@pytest.mark.parametrize(
    ("before", "action", "problem"),
    [
        ([], "resume", "is not paused"),
        (["pause"], "pause", "already paused"),
        ([], "resolve", "no open escalation"),
        (["close"], "pause", "is completed"),
        (["close"], "close", "is completed"),
        (["close"], "resume", "is completed"),
    ],
)
async def test_an_impossible_transition_is_invalid(
    make_node: NodeFactory, before: list[str], action: str, problem: str
) -> None:
    async with make_node() as node:
        thread_id = await pair(node)
        for earlier in before:
            await thread(node, "arch", earlier, thread_id=thread_id)
        with pytest.raises(InvalidParameters) as caught:
            await thread(node, "arch", action, thread_id=thread_id)

    assert problem in caught.value.message


def _described_needs(action: str) -> list[str]:
    """The parameters the bzzz_thread description says ``action`` needs."""
    for line in THREAD.splitlines():
        listed = re.match(r"- ([a-z /]+): needs? ([^;(]+)", line)
        if listed and action in [a.strip() for a in listed.group(1).split("/")]:
            return sorted(p.strip() for p in re.split(r",| and ", listed.group(2)) if p.strip())
    raise AssertionError(f"the description does not document {action}")


@pytest.mark.parametrize("action", ["pause", "resume", "resolve", "close"])
async def test_the_tool_description_names_what_a_status_action_needs(
    make_node: NodeFactory, action: str
) -> None:
    async with make_node() as node:
        await pair(node)
        with pytest.raises(InvalidParameters) as caught:
            await thread(node, "arch", action)

    assert _described_needs(action) == caught.value.details["missing"]


async def test_resolve_without_a_reason_resolves_the_escalation(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    stuck = [rule("stuck", [{"type": "no_progress", "threshold": True, "timeframe": 60}], NOTIFY)]
    async with make_node(stuck) as node:
        thread_id = await pair(node)
        clock.advance(61)
        await node.escalations.check_all()
        resolved = await thread(node, "arch", "resolve", thread_id=thread_id)

    assert resolved["result"]["status"] == "active"
    [escalation] = resolved["result"]["escalation_history"]
    assert (escalation["resolved"], escalation["resolution"]) == (True, "resolved")
