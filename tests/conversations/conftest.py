"""Nodes on a hand-moved clock whose monitor the test drives, helpers, and a local HTTP receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from receiver import ReceiverFactory, http_receiver  # noqa: F401 - the fixture

from bzzz.clock import ManualClock
from bzzz.config import EscalationRuleConfig, Settings
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput, SubscribeInput, ThreadInput

NodeFactory = Callable[..., AbstractAsyncContextManager[Node]]


def rule(name: str, conditions: list[dict[str, Any]], actions: list[dict[str, Any]]) -> Any:
    """An escalation rule as settings hold it."""
    return EscalationRuleConfig.model_validate(
        {"name": name, "conditions": conditions, "actions": actions}
    )


NOTIFY = [{"type": "notify_human", "target": "project_manager"}]


async def _idle(self: ThreadMonitor) -> None:
    # Does no work, but leaves when the node stops (as the real loop does).
    while not self._stopping:
        self._wakeup.clear()
        await self._wakeup.wait()


@pytest.fixture
def clock() -> ManualClock:
    """The clock the node's thread rules see."""
    return ManualClock()


@pytest.fixture
def make_node(
    settings: Settings,
    memory_bus: InMemoryBus,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> NodeFactory:
    """Start a node on the manual clock whose monitor idles: the test sweeps it itself.

    ``rules`` replaces the escalation rules; ``section={...}`` sets settings of a section.
    """
    monkeypatch.setattr(ThreadMonitor, "run", _idle)

    @asynccontextmanager
    async def start(rules: list[Any] | None = None, **sections: Any) -> AsyncIterator[Node]:
        # Threads stay open however far a test moves the clock, unless it sets the timeout.
        settings.conversation.default_timeout = 10**7
        if rules is not None:
            settings.conversation.escalation_rules = rules
        for section, values in sections.items():
            for name, value in values.items():
                setattr(getattr(settings, section), name, value)
        async with Node(settings, bus=memory_bus, clock=clock) as node:
            yield node

    return start


async def announce(node: Node, agent_id: str, role: str, **extra: Any) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role, **extra)
    )


async def thread(node: Node, agent_id: str, action: str, **params: Any) -> dict[str, Any]:
    return await node.conversations.thread(
        Caller(f"session-{agent_id}"), ThreadInput(action=action, **params)
    )


async def say(
    node: Node,
    agent_id: str,
    thread_id: str,
    text: str,
    *,
    kind: str = "text",
    reply_to: str | None = None,
    stance: str | None = None,
) -> dict[str, Any]:
    return await node.conversations.post(
        Caller(f"session-{agent_id}"),
        PostInput(
            target_address="bzzz://*",
            message_type=kind,
            content={"text": text},
            thread_id=thread_id,
            reply_to=reply_to,
            stance=stance,
        ),
    )


async def open_thread(node: Node, creator: str, *others: str, topic: str = "API design") -> str:
    created = await thread(node, creator, "create", participants=list(others), topic=topic)
    thread_id: str = created["thread_id"]
    return thread_id


async def watch(node: Node, *event_types: str) -> str:
    """Subscribe (as an observer session) to event types; returns the subscription id."""
    sub = await node.subscriptions.subscribe(
        Caller("observer"), SubscribeInput(event_types=list(event_types))
    )
    sub_id: str = sub["subscription_id"]
    return sub_id


async def events_of(node: Node, sub_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await node.subscriptions.events(LOCAL_CALLER, sub_id))["events"]
    return found


async def thread_view(node: Node, thread_id: str, max_history: int = 50) -> dict[str, Any]:
    from bzzz.schemas import GetInput

    got = await node.agents.get(
        LOCAL_CALLER, GetInput(address=f"bzzz://*/threads/{thread_id}", max_history=max_history)
    )
    view: dict[str, Any] = got["content"]["thread"]
    return view
