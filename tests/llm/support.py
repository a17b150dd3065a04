"""Helpers of the hosted-agent tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from bzzz.network.envelope import Envelope
from bzzz.node import Node
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
