"""Fixtures of the redaction tests: a scripted model endpoint and a node hosting one agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from bzzz.config import OpenAISettings, Settings
from bzzz.llm.testing import ScriptedModelServer
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.store.projection import Outcome

HostedNode = Callable[..., AbstractAsyncContextManager[Node]]


@pytest.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    """A scripted OpenAI-compatible endpoint on a free loopback port."""
    server = ScriptedModelServer()
    await server.start()
    try:
        yield server
    finally:
        server.gate.set()
        await server.close()


@pytest.fixture
def hosted_node(
    settings: Settings, memory_bus: InMemoryBus, model_server: ScriptedModelServer
) -> HostedNode:
    """Start a node whose hosted architect ``arch-1`` asks the scripted endpoint.

    Keyword arguments set ``privacy`` settings (``redact_models``, ``redact_stored``).
    """

    @asynccontextmanager
    async def start(**privacy: bool) -> AsyncIterator[Node]:
        settings.openai = OpenAISettings.model_validate(
            {"api_key": "test-key", "base_url": model_server.base_url, "backoff_initial": 0.0}
        )
        settings.agents.default_roles = [{"role": "architect", "agent_id": "arch-1"}]
        for name, value in privacy.items():
            setattr(settings.privacy, name, value)
        async with Node(settings, bus=memory_bus) as node:
            yield node

    return start


@pytest.fixture
def node_factory(settings: Settings, memory_bus: InMemoryBus) -> HostedNode:
    """Start a node without a model; keyword arguments set ``privacy`` settings."""

    @asynccontextmanager
    async def start(**privacy: bool) -> AsyncIterator[Node]:
        for name, value in privacy.items():
            setattr(settings.privacy, name, value)
        async with Node(settings, bus=memory_bus) as node:
            yield node

    return start


class TaskWatcher:
    """Learns from the projector when tasks end; tests wait on it with a bound."""

    def __init__(self, node: Node) -> None:
        self.ended: dict[str, str] = {}
        self._events: dict[str, asyncio.Event] = {}
        node.projector.add_outcome_listener(self._seen)

    def _seen(self, outcomes: dict[str, Outcome]) -> None:
        for outcome in outcomes.values():
            update = outcome.get("task_update") or {}
            if update.get("task_status") in ("completed", "failed"):
                self.ended[update["task_id"]] = update["task_status"]
                self._events.setdefault(update["task_id"], asyncio.Event()).set()

    async def finished(self, task_id: str) -> str:
        """Wait until the task is completed or failed (bound it with asyncio.timeout)."""
        await self._events.setdefault(task_id, asyncio.Event()).wait()
        return self.ended[task_id]
