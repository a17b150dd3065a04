"""Fixtures for hosted agents: a scripted OpenAI-compatible server and nodes that use it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bzzz.config import OpenAISettings, Settings
from bzzz.llm.testing import ScriptedModelServer
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .support import TaskWatcher

HOSTED_ROLES: list[dict[str, Any]] = [
    {"role": "architect", "agent_id": "arch-1", "max_tasks": 2},
    {"role": "reviewer", "agent_id": "rev-1"},
    {"role": "documentation", "agent_id": "docs-1"},
]


@pytest.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    """A scripted model endpoint on a free loopback port, refusing what OpenAI refuses."""
    server = ScriptedModelServer(strict=True)
    await server.start()
    try:
        yield server
    finally:
        server.gate.set()
        await server.close()


def use_model(settings: Settings, server: ScriptedModelServer, **openai: Any) -> Settings:
    """Point the settings at the scripted server, with retries that do not wait."""
    values = settings.openai.model_dump() | {
        "api_key": "test-key",
        "base_url": server.base_url,
        "backoff_initial": 0.0,
        "backoff_max": 0.0,
    }
    settings.openai = OpenAISettings.model_validate(values | openai)
    return settings


@pytest.fixture
def llm_settings(settings: Settings, model_server: ScriptedModelServer) -> Settings:
    """Settings of a node hosting an architect, a reviewer and a documentation agent."""
    use_model(settings, model_server)
    settings.agents.default_roles = [dict(role) for role in HOSTED_ROLES]
    return settings


@pytest.fixture
async def hosted_node(llm_settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A running node with hosted agents, on an in-memory bus and SQLite."""
    async with Node(llm_settings, bus=memory_bus) as running:
        yield running


@pytest.fixture
def watcher(hosted_node: Node) -> TaskWatcher:
    """Tells when the hosted node's tasks end."""
    return TaskWatcher(hosted_node)
