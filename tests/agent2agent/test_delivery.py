"""The bridge's deliveries on an in-process node: retried until the A2A agent answers."""

from __future__ import annotations

from typing import Any

import pytest
from e2e.support import eventually
from ports import free_port

from bzzz import domain
from bzzz.a2a import registry
from bzzz.a2a.registry import RemoteAgent
from bzzz.api.a2a_cards import a2a_task
from bzzz.config import Settings
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import PostInput
from bzzz.store.repository import Repository

from .remote import remote_agent

pytestmark = pytest.mark.integration


def _remote(port: int) -> RemoteAgent:
    return RemoteAgent(
        agent_id="echo-agent",
        role="a2a",
        project="shop",
        card_url=f"http://127.0.0.1:{port}/.well-known/agent-card.json",
        endpoint=f"http://127.0.0.1:{port}/",
        protocol_version="1.0",
        name="Echo Agent",
        skills=["echo"],
    )


async def test_a_task_for_an_a2a_agent_that_is_down_is_retried_until_it_answers(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    port = free_port()
    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    registry.save(data_dir, {"echo-agent": _remote(port)})
    settings.webhooks.initial_backoff = 0.05
    settings.webhooks.max_backoff = 0.1
    async with Node(settings, bus=memory_bus) as node:
        # The node announced the registry's agent as its own at start.
        agent = node.agents.directory.get("echo-agent")
        assert agent is not None and agent.online and agent.project == "shop"
        assert agent.metadata["a2a"]["endpoint"] == f"http://127.0.0.1:{port}/"
        sent = await node.conversations.post(
            Caller("proc-test", LOCAL),
            PostInput(
                target_address="bzzz://echo-agent",
                message_type="task_assignment",
                content={"task_type": "documentation", "description": "Document refunds"},
            ),
            as_principal=True,
        )
        task_id = sent["tasks"]["echo-agent"]

        async def task() -> Any:
            async with node.db.session() as session:
                return await Repository(session).task(task_id)

        # Nothing listens on the port yet: the delivery is retried, the task waits.
        await eventually(lambda: _in_flight(node), lambda n: n == 1)
        assert (await task()).status == "pending"
        async with remote_agent(port=port) as remote:
            done = await eventually(task, lambda t: t.status == "completed", within=20)
        assert done.result == "echo: Document refunds"
        assert remote.echo.asked == ["Document refunds"]


async def _in_flight(node: Node) -> int:
    return len(node.a2a._jobs)


def _task(**changes: Any) -> domain.Task:
    now = domain.utcnow()
    fields: dict[str, Any] = {
        "id": "task-1", "agent_id": "a-1", "assigner": "token:t", "type": "chat_completion",
        "description": "d", "status": "pending", "priority": "medium", "data": {},
        "thread_id": None, "message_id": "msg-1", "progress": None, "result": None,
        "error": None, "start_time": now, "end_time": None,
    }  # fmt: skip
    return domain.Task(**(fields | changes))


def test_a_bzzz_tasks_states_map_onto_a2a_states() -> None:
    from a2a.types import TaskState

    assert a2a_task(_task()).status.state == TaskState.TASK_STATE_SUBMITTED
    assert a2a_task(_task(status="in_progress")).status.state == TaskState.TASK_STATE_WORKING
    waiting = a2a_task(_task(status="in_progress", thread_id="th-1"), input_required=True)
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "escalated" in waiting.status.message.parts[0].text
    done = a2a_task(_task(status="completed", result="ok"))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "ok"
    failed = a2a_task(_task(status="failed", error="no model"))
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    canceled = a2a_task(_task(status="failed", error="canceled by token:t: canceled over A2A"))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_damaged_registry_costs_its_agents_not_the_node(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    data_dir = settings.node.data_dir.expanduser()
    data_dir.mkdir(parents=True, exist_ok=True)
    registry.path_of(data_dir).write_text('{"agents": [{"agent_id": "x"}]}')
    async with Node(settings, bus=memory_bus) as node:
        assert node.healthy
        assert node.a2a.remote == {} and node.agents.directory.get("x") is None
