"""Memory: episodes feed later prompts of the same project and never those of another."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from mcp import Client

from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.node import Node

from .support import TaskWatcher

SECRET = "ALPHA-LAUNCH-CODE-4242"


async def run_task(
    boss: Client, watcher: TaskWatcher, agent_id: str, text: str, project: str | None
) -> str:
    data: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    if project is not None:
        data["project"] = project
    posted = await boss.call_tool(
        "bzzz_post",
        {
            "target_address": f"bzzz://{agent_id}",
            "message_type": "task_assignment",
            "content": {"task_type": "chat_completion", "description": text, "task_data": data},
        },
    )
    assert posted.structured_content is not None, posted.content
    task_id: str = posted.structured_content["tasks"][agent_id]
    async with asyncio.timeout(10):
        return await watcher.finished(task_id)


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


async def test_nothing_learned_in_one_project_reaches_a_prompt_for_another(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    model_server.push(
        Step(content=f"Noted: the alpha secret is {SECRET}."),
        Step(content="beta answer"),
        Step(content="unscoped answer"),
        Step(content="alpha again"),
    )
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        assert await run_task(boss, watcher, "arch-1", f"remember {SECRET}", "alpha") == "completed"
        assert await run_task(boss, watcher, "arch-1", "plan beta", "beta") == "completed"
        assert await run_task(boss, watcher, "arch-1", "no project", None) == "completed"
        assert await run_task(boss, watcher, "arch-1", "alpha follow-up", "alpha") == "completed"

    _, beta, unscoped, alpha_again = (prompt_text(b) for b in model_server.requests)
    assert SECRET not in beta
    assert SECRET not in unscoped
    assert "remember" not in beta and "remember" not in unscoped
    for elsewhere in ("plan beta", "beta answer", "no project", "unscoped answer"):
        assert elsewhere not in alpha_again
    # The same project does remember: the check above could fail.
    assert SECRET in alpha_again
    assert "What you remember from this project" in alpha_again


async def test_an_agent_bound_to_a_project_refuses_work_for_another(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    reviewer = hosted_node.hosted.hosted["rev-1"]
    reviewer.spec = dataclasses.replace(reviewer.spec, project="alpha")
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        assert await run_task(boss, watcher, "rev-1", "other project", "beta") == "failed"

    assert model_server.requests == []


async def test_an_agent_reading_its_own_history_sees_only_this_projects_work(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    reads = [
        ("bzzz_get", {"address": "bzzz://arch-1/tasks"}),
        ("bzzz_get", {"address": "bzzz://arch-1"}),
        ("bzzz_get", {"address": "bzzz://arch-1/inbox"}),
    ]
    model_server.push(
        Step(content=f"Noted: the alpha secret is {SECRET}."),
        Step(content="", tool_calls=reads),
        Step(content="beta done"),
    )
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        assert await run_task(boss, watcher, "arch-1", f"remember {SECRET}", "alpha") == "completed"
        assert await run_task(boss, watcher, "arch-1", "look back", "beta") == "completed"

    tool_answers = [
        m["content"] for m in model_server.requests[2]["messages"] if m["role"] == "tool"
    ]
    assert len(tool_answers) == 3
    assert all(SECRET not in answer for answer in tool_answers)
    # The beta task itself is visible: the filter keeps this project's work.
    assert "look back" in tool_answers[0]
