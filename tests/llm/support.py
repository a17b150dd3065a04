"""Helpers of the hosted-agent tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from bzzz.llm.classifier import INSIGHT_PROMPT
from bzzz.llm.collaboration import DRAFT_REQUEST
from bzzz.llm.testing import Step
from bzzz.network.envelope import Envelope
from bzzz.node.core import Node
from bzzz.store.projection import Outcome


class TaskWatcher:
    """Learns from the projector when tasks end; tests wait on it with a bound."""

    def __init__(self, node: Node) -> None:
        self.ended: dict[str, str] = {}
        self._events: dict[str, asyncio.Event] = {}
        node.projector.add_outcome_listener(self._seen)

    def _event(self, task_id: str) -> asyncio.Event:
        return self._events.setdefault(task_id, asyncio.Event())

    def _seen(self, outcomes: dict[str, Outcome]) -> None:
        for outcome in outcomes.values():
            update = outcome.get("task_update") or {}
            if update.get("task_status") in ("completed", "failed"):
                self.ended[update["task_id"]] = update["task_status"]
                self._event(update["task_id"]).set()

    async def finished(self, task_id: str) -> str:
        """Wait until the task is completed or failed (bound it with asyncio.timeout)."""
        await self._event(task_id).wait()
        return self.ended[task_id]


class LogWatcher:
    """Records applied envelopes in log order; tests wait for one with a bound."""

    def __init__(self, node: Node) -> None:
        self.envelopes: list[Envelope] = []
        self._changed = asyncio.Event()
        node.projector.add_applied_listener(self._seen)

    def _seen(self, envelopes: Sequence[Envelope]) -> None:
        self.envelopes.extend(envelopes)
        self._changed.set()

    def messages_to(self, agent_id: str) -> list[dict[str, Any]]:
        """The payloads of messages addressed to an agent, in log order."""
        return [
            e.payload
            for e in self.envelopes
            if e.type == "message.posted" and agent_id in (e.payload.get("recipients") or [])
        ]

    def thread_messages(self, thread_id: str) -> list[dict[str, Any]]:
        """The payloads of a thread's messages, in log order."""
        return [
            e.payload
            for e in self.envelopes
            if e.type == "message.posted" and e.payload.get("thread_id") == thread_id
        ]

    async def first(self, match: Callable[[Envelope], bool]) -> Envelope:
        """The first applied envelope that matches (bound it with asyncio.timeout)."""
        while True:
            self._changed.clear()
            found = next((e for e in self.envelopes if match(e)), None)
            if found is not None:
                return found
            await self._changed.wait()


RESULT = "Keep the event log on JetStream with three replicas (SHOP-DECISION-77)."
ROLE_LINE = "Your role in this collaboration: "


def _text(message: dict[str, Any]) -> str:
    return str(message.get("content") or "")


def asked(body: dict[str, Any]) -> str:
    """The last user message of a request: what the model is asked."""
    return next(_text(m) for m in reversed(body["messages"]) if m["role"] == "user")


def role_of(body: dict[str, Any]) -> str:
    system = _text(body["messages"][0])
    if ROLE_LINE not in system:
        return ""
    return system.split(ROLE_LINE, 1)[1].split("\n", 1)[0].strip()


class Panel:
    """A scripted model playing every hosted agent: findings, stances, the result."""

    def __init__(self, disagreeing: frozenset[str] = frozenset()) -> None:
        self.disagreeing = disagreeing

    def __call__(self, body: dict[str, Any]) -> Step:
        question, role = asked(body), role_of(body)
        if question.startswith("Answer this decision"):
            if role in self.disagreeing:
                return Step(content="DISAGREE: the replicas are not justified yet.")
            return Step(content="AGREE: this is what we found too.")
        if question.startswith(("Answer this", "You were asked")):
            return Step(content=f"Findings of the {role}: the log must survive a node loss.")
        if DRAFT_REQUEST in question:
            return Step(content=RESULT)
        if _text(body["messages"][0]).startswith(INSIGHT_PROMPT[:40]):
            return Step(content="A replicated log survives the loss of a node.")
        return Step(content="Solo answer.")
