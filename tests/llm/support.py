"""Helpers of the hosted-agent tests."""

from __future__ import annotations

import asyncio

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
