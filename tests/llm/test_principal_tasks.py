"""A hosted agent works a task that a principal assigned itself (no agent of its own): the
result lands on the task, which the principal reads; no inbox was needed to answer it."""

from __future__ import annotations

import asyncio

from bzzz.access.keys import STATELESS
from bzzz.eventlog import Caller
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.node.core import Node
from bzzz.schemas import GetInput, PostInput

from .support import TaskWatcher

GUIDE = {"content": "bzzz serve starts a node", "documentType": "guide", "audience": "teams"}


async def test_a_hosted_agent_completes_a_task_the_anonymous_principal_assigned(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    model_server.responder = lambda body: Step(content="The guide, written.")
    orchestrator = Caller(STATELESS)  # a node without credentials: the anonymous principal
    assignment = PostInput(
        target_address="bzzz://docs-1",
        message_type="task_assignment",
        content={"task_type": "documentation", "description": "the guide", "task_data": GUIDE},
    )

    posted = await hosted_node.conversations.post(orchestrator, assignment, as_principal=True)
    task_id = posted["tasks"]["docs-1"]
    async with asyncio.timeout(30):
        assert await watcher.finished(task_id) == "completed"
    tasks = await hosted_node.agents.get(
        orchestrator, GetInput(address="bzzz://docs-1/tasks", max_history=5)
    )

    [task] = tasks["content"]["tasks"]
    assert (task["id"], task["assigner"], task["status"]) == (
        task_id,
        "principal:anonymous",
        "completed",
    )
    assert task["result"]["content"] == "The guide, written."
