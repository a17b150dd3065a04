"""A scripted scenario on an in-process node: agents, tasks, an escalation, a consensus, costs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from bzzz.clock import ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.eventlog import Caller
from bzzz.llm.types import TokenUsage
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput

STUCK = EscalationRuleConfig.model_validate(
    {
        "name": "stuck",
        "conditions": [{"type": "no_progress", "threshold": True, "timeframe": 600}],
        "actions": [{"type": "notify_human", "target": "project_manager"}],
    }
)


@dataclass(slots=True)
class Scenario:
    """What the script did, so tests know the figures to expect."""

    task_cost_nanos: int
    reply_cost_nanos: int
    raw_tokens: int
    sent_tokens: int


async def _idle(self: ThreadMonitor) -> None:
    # The test moves the clock and checks the rules itself.
    while not self._stopping:
        self._wakeup.clear()
        await self._wakeup.wait()


@pytest.fixture
async def scenario_node(
    settings: Settings, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Node, Scenario]]:
    """A node after the script below ran on it (on a hand-moved clock)."""
    monkeypatch.setattr(ThreadMonitor, "run", _idle)
    settings.conversation.default_timeout = 10**7
    settings.conversation.escalation_rules = [STUCK]
    clock = ManualClock()
    async with Node(settings, bus=memory_bus, clock=clock) as node:
        yield node, await play(node, clock)


async def announce(node: Node, agent_id: str, role: str, **extra: Any) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role, **extra)
    )


async def post(
    node: Node, sender: str, target: str, kind: str, thread_id: str | None = None, **content: Any
) -> dict[str, Any]:
    return await node.conversations.post(
        Caller(f"session-{sender}"),
        PostInput(
            target_address=target,
            message_type=kind,
            content=content,
            thread_id=thread_id,
            reply_to=content.pop("reply_to", None),
            stance=content.pop("stance", None),
        ),
    )


async def open_thread(node: Node, creator: str, *others: str) -> str:
    created = await node.conversations.thread(
        Caller(f"session-{creator}"),
        ThreadInput(action="create", participants=list(others), topic="API design"),
    )
    thread_id: str = created["thread_id"]
    return thread_id


async def play(node: Node, clock: ManualClock) -> Scenario:
    """Three agents; tasks: one done in 30 s, one failed, one pending; three threads: one
    reaches consensus, one escalates to a human, one proposes a decision nobody answers."""
    await announce(node, "boss", "architect")
    await announce(node, "dev", "developer", max_tasks=1)
    await announce(node, "rev", "reviewer")
    first = await post(node, "boss", "bzzz://dev", "task_assignment", description="review A")
    clock.advance(30)
    done = first["tasks"]["dev"]
    await post(node, "dev", "bzzz://boss", "task_complete", task_id=done, result="LGTM")
    second = await post(node, "boss", "bzzz://rev", "task_assignment", description="review B")
    await post(node, "rev", "bzzz://boss", "task_failed", task_id=second["tasks"]["rev"], error="x")
    await post(node, "boss", "bzzz://dev", "task_assignment", description="review C")

    agreed = await open_thread(node, "boss", "dev")
    decision = await post(node, "boss", "bzzz://*", "decision", agreed, text="We use PostgreSQL.")
    await post(
        node,
        "dev",
        "bzzz://*",
        "text",
        agreed,
        text="Yes.",
        reply_to=decision["message_id"],
        stance="agree",
    )
    await open_thread(node, "boss", "rev")
    clock.advance(601)
    await node.escalations.check_all()
    unanswered = await open_thread(node, "dev", "rev")
    await post(node, "dev", "bzzz://*", "decision", unanswered, text="We use SQLite.")

    task_cost = await node.llm.costs.record("gpt-4o", TokenUsage(1000, 500), "dev", "code_review")
    reply_cost = await node.llm.costs.record("gpt-4o", TokenUsage(200, 100), "rev", "thread_reply")
    long = [{"role": "user", "content": "word " * 50} for _ in range(10)]
    context = node.hosted.agency.turns.context
    context.count(long, long[-3:])  # type: ignore[arg-type]
    return Scenario(task_cost, reply_cost, context.raw_tokens, context.sent_tokens)
