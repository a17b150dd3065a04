"""Hosted agents end to end through MCP: assign a task, the agent works, the result comes back."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import Client

from bzzz.eventlog import Caller
from bzzz.llm.lifecycle import AgentState
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.llm.tools import ToolBox
from bzzz.llm.types import ToolCall
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

from .support import TaskWatcher

TASKS: dict[str, tuple[str, dict[str, Any], str]] = {
    "chat_completion": (
        "arch-1",
        {"messages": [{"role": "user", "content": "Which queue fits an event log?"}]},
        "Which queue fits an event log?",
    ),
    "code_review": (
        "rev-1",
        {"code": "def add(a, b):\n    return a - b", "language": "python", "context": "math"},
        "return a - b",
    ),
    "documentation": (
        "docs-1",
        {"content": "bzzz_post sends messages", "documentType": "api", "audience": "developers"},
        "bzzz_post sends messages",
    ),
    "architecture_analysis": (
        "arch-1",
        {
            "systemDescription": "three nodes share a NATS cluster",
            "requirements": "no lost messages",
            "constraints": "two cores",
        },
        "three nodes share a NATS cluster",
    ),
}


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def assign(client: Client, agent_id: str, task_type: str, data: dict[str, Any]) -> str:
    posted = await call(
        client,
        "bzzz_post",
        target_address=f"bzzz://{agent_id}",
        message_type="task_assignment",
        content={"task_type": task_type, "description": f"a {task_type} task", "task_data": data},
    )
    task_id: str = posted["tasks"][agent_id]
    return task_id


async def task_of(client: Client, agent_id: str, task_id: str) -> dict[str, Any]:
    got = await call(client, "bzzz_get", address=f"bzzz://{agent_id}/tasks", max_history=50)
    [task] = [t for t in got["content"]["tasks"] if t["id"] == task_id]
    return task


@pytest.mark.parametrize("task_type", list(TASKS))
async def test_a_task_of_each_type_is_done_and_its_result_posted_back(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher, task_type: str
) -> None:
    agent_id, data, expected_in_prompt = TASKS[task_type]
    model_server.push(Step(content=f"Result of the {task_type}.", usage=(120, 30)))
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        task_id = await assign(boss, agent_id, task_type, data)
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"

        task = await task_of(boss, agent_id, task_id)
        inbox = await call(boss, "bzzz_get", address="bzzz://boss/inbox")

    result = task["result"]
    assert result["content"] == f"Result of the {task_type}."
    assert result["task_type"] == task_type
    assert result["usage"] == {"promptTokens": 120, "completionTokens": 30, "totalTokens": 150}
    assert result["cost"] > 0
    [done] = [m for m in inbox["content"]["messages"] if m["message_type"] == "task_complete"]
    assert (done["sender"], done["content"]["task_id"]) == (agent_id, task_id)
    [sent] = model_server.requests
    assert any(expected_in_prompt in prompt for prompt in model_server.prompts())
    assert sent["messages"][0]["role"] == "system"


async def test_the_model_calls_bzzz_tools_in_a_loop_through_the_services(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    model_server.push(
        Step(content="", tool_calls=[("bzzz_lookup", {"semantic_address": "bzzz://*:reviewer@*"})]),
        Step(
            content="",
            tool_calls=[
                (
                    "bzzz_post",
                    {
                        "target_address": "bzzz://boss",
                        "message_type": "text",
                        "content": {"text": "rev-1 can review this"},
                    },
                )
            ],
        ),
        Step(content="Asked around; rev-1 reviews."),
    )
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        task_id = await assign(
            boss, "arch-1", "chat_completion", {"messages": [{"role": "user", "content": "Who?"}]}
        )
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"
        inbox = await call(boss, "bzzz_get", address="bzzz://boss/inbox")
        task = await task_of(boss, "arch-1", task_id)

    assert len(model_server.requests) == 3
    first, second, third = model_server.requests
    assert [t["function"]["name"] for t in first["tools"]] == [
        "bzzz_lookup",
        "bzzz_get",
        "bzzz_post",
        "bzzz_thread",
    ]
    lookup_answer = json.loads(second["messages"][-1]["content"])
    assert second["messages"][-1]["role"] == "tool"
    assert [m["id"] for m in lookup_answer["matches"]] == ["rev-1"]
    assert third["messages"][-2]["tool_calls"][0]["function"]["name"] == "bzzz_post"
    texts = [m for m in inbox["content"]["messages"] if m["message_type"] == "text"]
    assert texts[0]["sender"] == "arch-1"
    assert texts[0]["content"] == {"text": "rev-1 can review this"}
    assert task["result"]["tool_calls"] == ["bzzz_lookup", "bzzz_post"]
    assert task["result"]["model_calls"] == 3


async def test_the_tool_loop_is_bounded_and_the_last_round_offers_no_tools(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    hosted_node.hosted.agency.turns.max_tool_rounds = 2
    model_server.responder = lambda body: Step(
        content="still looking", tool_calls=[("bzzz_lookup", {"semantic_address": "bzzz://*"})]
    )
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        task_id = await assign(
            boss, "arch-1", "chat_completion", {"messages": [{"role": "user", "content": "Loop"}]}
        )
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"

    assert len(model_server.requests) == 3
    assert [bool(r.get("tools")) for r in model_server.requests] == [True, True, False]


async def test_a_tool_error_goes_back_to_the_model_as_an_error_response(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    model_server.push(
        Step(content="", tool_calls=[("bzzz_get", {"address": "bzzz://nobody"})]),
        Step(content="nobody is there"),
    )
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        task_id = await assign(
            boss, "arch-1", "chat_completion", {"messages": [{"role": "user", "content": "?"}]}
        )
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"

    answer = json.loads(model_server.requests[1]["messages"][-1]["content"])
    assert (answer["success"], answer["code"]) == (False, "AGENT_NOT_FOUND")


async def test_invalid_task_data_fails_the_task_with_the_field_named(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        task_id = await assign(boss, "rev-1", "code_review", {"language": "python"})
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "failed"
        task = await task_of(boss, "rev-1", task_id)

    assert "'code'" in task["error"]
    assert model_server.requests == []


async def test_an_agent_works_up_to_max_tasks_at_once_and_goes_idle_after(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    architect = hosted_node.hosted.hosted["arch-1"]
    model_server.gate.clear()
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        data = {"messages": [{"role": "user", "content": "work"}]}
        first = await assign(boss, "arch-1", "chat_completion", data)
        second = await assign(boss, "arch-1", "chat_completion", data)
        async with asyncio.timeout(10):
            await model_server.wait_for_requests(2)
        assert (architect.running, architect.lifecycle.state) == (2, AgentState.ACTIVE)
        model_server.gate.set()
        async with asyncio.timeout(10):
            assert await watcher.finished(first) == "completed"
            assert await watcher.finished(second) == "completed"
        info = await call(boss, "bzzz_get", address="bzzz://arch-1")

    assert architect.lifecycle.state is AgentState.IDLE
    assert architect.lifecycle.history[:3] == [
        AgentState.INITIALIZING,
        AgentState.IDLE,
        AgentState.ACTIVE,
    ]
    agent = info["content"]["agent_info"]
    assert (agent["status"], agent["active_tasks"]) == ("idle", 0)
    assert agent["performance"] > 0.9


async def test_a_task_in_a_thread_is_answered_in_the_thread_while_collaborating(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    architect = hosted_node.hosted.hosted["arch-1"]
    model_server.gate.clear()
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        thread = await call(
            boss, "bzzz_thread", action="create", participants=["arch-1"], topic="design"
        )
        posted = await call(
            boss,
            "bzzz_post",
            target_address="bzzz://arch-1",
            message_type="task_assignment",
            thread_id=thread["thread_id"],
            content={
                "task_type": "chat_completion",
                "task_data": {"messages": [{"role": "user", "content": "In the thread?"}]},
            },
        )
        task_id = posted["tasks"]["arch-1"]
        async with asyncio.timeout(10):
            await model_server.wait_for_requests(1)
        assert architect.lifecycle.state is AgentState.COLLABORATING
        model_server.gate.set()
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"
        got = await call(boss, "bzzz_get", address=f"bzzz://boss/threads/{thread['thread_id']}")

    kinds = [(m["sender"], m["messageType"]) for m in got["content"]["thread"]["messages"]]
    assert ("arch-1", "task_complete") in kinds
    assert architect.lifecycle.state is AgentState.IDLE


async def test_a_streamed_chat_task_is_assembled_and_booked(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    text = "A streamed answer, delivered in many small pieces."
    model_server.push(Step(content=text, usage=(40, 11)))
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        data = {"messages": [{"role": "user", "content": "stream it"}], "stream": True}
        task_id = await assign(boss, "arch-1", "chat_completion", data)
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"
        task = await task_of(boss, "arch-1", task_id)
    usage = await hosted_node.llm.usage()

    assert model_server.requests[0]["stream"] is True
    assert task["result"]["content"] == text
    assert task["result"]["usage"]["totalTokens"] == 51
    assert usage["daily"]["tokens"]["total"] == 51


async def test_tool_arguments_that_are_not_json_are_reported_to_the_model(
    hosted_node: Node,
) -> None:
    toolbox = ToolBox(
        hosted_node.agents,
        hosted_node.conversations,
        Caller("hosted-arch-1"),
        db=hosted_node.db,
        agent_id="arch-1",
        project="",
        agent_project=None,
    )

    answer = json.loads(await toolbox.run(ToolCall("c1", "bzzz_lookup", "{not json")))
    unknown = json.loads(await toolbox.run(ToolCall("c2", "bzzz_announce", "{}")))

    assert (answer["code"], answer["error"]) == (
        "INVALID_PARAMETERS",
        "the arguments of bzzz_lookup must be a JSON object",
    )
    assert "unknown tool 'bzzz_announce'" in unknown["error"]
