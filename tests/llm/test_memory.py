"""Memory: episodes feed later prompts of the same project and never those of another."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from mcp import Client

from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

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
    async with asyncio.timeout(30):  # a bound, not a speed target
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


async def alpha_thread(boss: Client, watcher: TaskWatcher) -> str:
    """A thread of project alpha that arch-1 worked in, holding alpha's secret."""
    created = await boss.call_tool(
        "bzzz_thread",
        {"action": "create", "participants": ["arch-1"], "topic": f"launch {SECRET}"},
    )
    assert created.structured_content is not None, created.content
    thread_id: str = created.structured_content["thread_id"]
    posted = await boss.call_tool(
        "bzzz_post",
        {
            "target_address": "bzzz://arch-1",
            "message_type": "task_assignment",
            "thread_id": thread_id,
            "content": {
                "task_type": "chat_completion",
                "task_data": {
                    "project": "alpha",
                    "messages": [{"role": "user", "content": "plan the launch"}],
                },
            },
        },
    )
    assert posted.structured_content is not None, posted.content
    async with asyncio.timeout(30):  # a bound, not a speed target
        assert await watcher.finished(posted.structured_content["tasks"]["arch-1"]) == "completed"
    said = await boss.call_tool(
        "bzzz_post",
        {
            "target_address": "bzzz://*",
            "message_type": "text",
            "thread_id": thread_id,
            "content": {"text": f"the launch code is {SECRET}"},
        },
    )
    assert not said.is_error, said.content
    return thread_id


def thread_reads(thread_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Every way a model could look into a thread."""
    return [
        ("bzzz_get", {"address": "bzzz://arch-1/threads"}),
        ("bzzz_get", {"address": f"bzzz://arch-1/threads/{thread_id}"}),
        ("bzzz_get", {"address": f"bzzz://boss/threads/{thread_id}"}),
        ("bzzz_get", {"address": "bzzz://boss/threads"}),
        ("bzzz_get", {"address": "bzzz://arch-1/inbox"}),
        ("bzzz_thread", {"action": "list"}),
        ("bzzz_thread", {"action": "summarize", "thread_id": thread_id}),
        ("bzzz_thread", {"action": "join", "thread_id": thread_id}),
    ]


def tool_answers(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


async def test_a_thread_of_one_project_stays_out_of_prompts_for_another(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        model_server.push(Step(content="alpha planned"))
        thread_id = await alpha_thread(boss, watcher)
        reads = thread_reads(thread_id)
        post = (
            "bzzz_post",
            {
                "target_address": "bzzz://*",
                "message_type": "text",
                "thread_id": thread_id,
                "content": {"text": "beta's plans"},
            },
        )
        model_server.push(
            Step(content="", tool_calls=[*reads, post]),
            Step(content="beta done"),
            Step(content="", tool_calls=reads),
            Step(content="unscoped done"),
        )
        assert await run_task(boss, watcher, "arch-1", "look around", "beta") == "completed"
        assert await run_task(boss, watcher, "arch-1", "look around", None) == "completed"
        thread = await boss.call_tool("bzzz_get", {"address": f"bzzz://boss/threads/{thread_id}"})

    alpha_task, *others = model_server.requests
    # Alpha's own task was assigned in the thread: its prompt carries the thread's topic.
    assert any(SECRET in str(m["content"]) for m in alpha_task["messages"])
    assert all(SECRET not in str(m["content"]) for body in others for m in body["messages"])
    for body in (model_server.requests[2], model_server.requests[4]):
        answers = [json.loads(a) for a in tool_answers(body)]
        assert len(answers) == len(reads) + (body is model_server.requests[2])
        refused = [a for a in answers if a.get("success") is False]
        # Reading, summarizing, joining and posting into the thread are refused by name.
        assert len(refused) == 4 + (body is model_server.requests[2])
        assert all("is not part of" in a["error"] for a in refused)
    assert thread.structured_content is not None
    texts = [m["content"] for m in thread.structured_content["content"]["thread"]["messages"]]
    assert "beta's plans" not in texts
    assert f"the launch code is {SECRET}" in texts


async def test_a_task_of_the_same_project_sees_its_thread(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        model_server.push(Step(content="alpha planned"))
        thread_id = await alpha_thread(boss, watcher)
        reads = [r for r in thread_reads(thread_id) if r[1].get("action") != "summarize"]
        model_server.push(Step(content="", tool_calls=reads), Step(content="alpha done"))
        assert await run_task(boss, watcher, "arch-1", "look again", "alpha") == "completed"

    answers = tool_answers(model_server.requests[2])
    assert all(json.loads(a).get("success", True) is not False for a in answers), answers
    # Every read shows the thread's topic or messages: alpha's secret, to alpha's own task.
    assert all(SECRET in a for a in answers)
    assert len(answers) == len(reads)


async def test_a_hosted_agent_cannot_change_a_threads_status(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        model_server.push(Step(content="alpha planned"))
        thread_id = await alpha_thread(boss, watcher)
        changes = [
            ("bzzz_thread", {"action": action, "thread_id": thread_id, "reason": "done"})
            for action in ("pause", "resume", "resolve", "close")
        ]
        changes.append(("bzzz_thread", {"action": "review", "roles": ["reviewer"], "topic": "x"}))
        model_server.push(Step(content="", tool_calls=changes), Step(content="tried"))
        assert await run_task(boss, watcher, "arch-1", "wrap it up", "alpha") == "completed"
        thread = await boss.call_tool("bzzz_get", {"address": f"bzzz://boss/threads/{thread_id}"})
        listed = await boss.call_tool("bzzz_thread", {"action": "list"})

    answers = [json.loads(a) for a in tool_answers(model_server.requests[2])]
    assert [a["code"] for a in answers] == ["INVALID_PARAMETERS"] * 5
    actions = ("pause", "resume", "resolve", "close", "review")
    for answer, action in zip(answers, actions, strict=True):
        assert answer["error"].startswith(f"a hosted agent cannot '{action}' a thread")
    assert thread.structured_content is not None
    assert thread.structured_content["content"]["thread"]["status"] == "active"
    assert listed.structured_content is not None
    assert len(listed.structured_content["result"]) == 1


async def test_another_agents_inbox_of_another_project_stays_out_of_prompts(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    server, _ = build_server(hosted_node)
    async with (
        Client(server, mode="legacy") as boss,
        Client(server, mode="legacy") as alice,
    ):
        await boss.call_tool("bzzz_announce", {"agent_id": "boss", "role": "lead"})
        await alice.call_tool(
            "bzzz_announce", {"agent_id": "alice", "role": "dev", "project": "alpha"}
        )
        await alice.call_tool(
            "bzzz_post",
            {"target_address": "bzzz://boss", "message_type": "text",
             "content": {"text": f"the launch code is {SECRET}", "project": "alpha"}},
        )  # fmt: skip
        reads = [("bzzz_get", {"address": a}) for a in ("bzzz://boss/inbox", "bzzz://boss")]
        model_server.push(Step(content="", tool_calls=reads), Step(content="beta done"))
        assert await run_task(boss, watcher, "arch-1", "look around", "beta") == "completed"
        model_server.push(Step(content="", tool_calls=reads[:1]), Step(content="alpha done"))
        assert await run_task(boss, watcher, "arch-1", "look again", "alpha") == "completed"

    # Everything each request carried (system, user and tool messages), as the server saw it.
    seen = [json.dumps(body) for body in model_server.requests]
    assert len(seen) == 4
    assert all(SECRET not in body for body in seen[:2])
    # Even for a task of the message's project, another agent's inbox is its owner's alone.
    assert SECRET not in seen[3]
    assert "PERMISSION_DENIED" in seen[3]
