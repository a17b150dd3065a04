"""Hosted agents collaborate for real, end to end through MCP, against a strict OpenAI-like server.

A task with required roles opens a review thread; the hosted reviewer and documentation agents
answer with the thread's history in their prompts, agree, the consensus completes the thread,
the SLURP event is emitted, its decisions become the project's knowledge and the result reaches
the assigner. Agents that always disagree stop at the reply bound and the thread escalates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from bzzz.config import EscalationRuleConfig, Settings
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.network.envelope import Envelope
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .support import RESULT, LogWatcher, Panel, TaskWatcher, _text, asked, role_of


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
        content={"task_type": task_type, "description": "design the event log", "task_data": data},
    )
    task_id: str = posted["tasks"][agent_id]
    return task_id


ARCHITECTURE = {
    "systemDescription": "three nodes share one event log",
    "requirements": "no acknowledged message is lost",
    "project": "shop",
}


@pytest.mark.parametrize("mode", ["legacy", "stateless"])
async def test_a_task_with_required_roles_is_reviewed_agreed_and_its_result_reaches_the_assigner(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher, mode: str
) -> None:
    model_server.responder = Panel()
    log = LogWatcher(hosted_node)
    server, _ = build_server(hosted_node)
    client = Client(server, mode="legacy") if mode == "legacy" else Client(server)
    async with client as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        data = ARCHITECTURE | {"required_roles": ["reviewer", "documentation"]}
        task_id = await assign(boss, "arch-1", "architecture_analysis", data)
        async with asyncio.timeout(30):
            assert await watcher.finished(task_id) == "completed"
            slurp = await log.first(lambda e: e.type == "slurp.generated")
            learnt = await log.first(lambda e: e.type == "knowledge.recorded")
        tasks = await call(boss, "bzzz_get", address="bzzz://arch-1/tasks", max_history=10)
        [task] = [t for t in tasks["content"]["tasks"] if t["id"] == task_id]
        thread_id = task["result"]["thread_id"]
        thread = await call(boss, "bzzz_get", address=f"bzzz://arch-1/threads/{thread_id}")

    result = task["result"]
    assert result["content"] == RESULT
    assert set(result["consensus"]["agreed_by"]) == {"arch-1", "rev-1", "docs-1"}
    assert task["progress"]["thread_id"] == thread_id
    assert task["thread_id"] == thread_id  # the thread id is on the task itself
    # The assigner heard of the thread before the result, and the result came to it directly.
    to_boss = [(m["message_type"], m["content"]) for m in log.messages_to("boss")]
    kinds = [kind for kind, _ in to_boss]
    assert kinds.index("task_progress") < kinds.index("task_complete")
    assert any(c.get("thread_id") == thread_id for k, c in to_boss if k == "task_progress")

    info = thread["content"]["thread"]
    assert info["status"] == "completed"
    assert info["consensus"]["decisions"] == [RESULT]
    messages = log.thread_messages(thread_id)
    decision = next(m for m in messages if m["message_type"] == "decision")
    for reviewer in ("rev-1", "docs-1"):
        findings, stance = [m for m in messages if m["sender"] == reviewer]
        assert findings["content"]["in_reply_to"] == messages[0]["message_id"]
        assert (stance["reply_to"], stance["stance"]) == (decision["message_id"], "agree")
    assert slurp.payload["thread_id"] == thread_id
    assert learnt.payload["project"] == "shop"
    assert any(RESULT in e["text"] for e in learnt.payload["entries"])

    # The reviewers answered the decision with the thread's history and participants in view.
    stance_prompts = [
        b for b in model_server.requests if asked(b).startswith("Answer this decision")
    ]
    assert {role_of(b) for b in stance_prompts} == {"reviewer", "documentation"}
    for body in stance_prompts:
        system = _text(body["messages"][0])
        assert f"thread '{thread_id}'" in system and "arch-1 (architect)" in system
        assert "Available BZZZ tools:" in system
        shared = [_text(m) for m in body["messages"][1:] if m["role"] == "system"]
        assert any("systemDescription: three nodes share one event log" in t for t in shared)
        history = [_text(m) for m in body["messages"][1:-1] if m["role"] == "user"]
        assert history[0].startswith("[arch-1]: Collaborative review")
        assert any(h.startswith("[rev-1]: Findings of the reviewer") for h in history)
        assert any(h.startswith("[docs-1]: Findings of the documentation") for h in history)
    assert model_server.refused == []


async def test_a_required_role_with_nobody_available_fails_the_task_clearly(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        data = ARCHITECTURE | {"required_roles": ["reviewer", "security_auditor"]}
        task_id = await assign(boss, "arch-1", "architecture_analysis", data)
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "failed"
        inbox = await call(boss, "bzzz_get", address="bzzz://boss/inbox")
        threads = await call(boss, "bzzz_get", address="bzzz://arch-1/threads")

    [failed] = [m for m in inbox["content"]["messages"] if m["message_type"] == "task_failed"]
    assert failed["content"]["code"] == "AGENT_NOT_FOUND"
    assert "'security_auditor'" in failed["content"]["error"]
    assert threads["content"]["threads"] == []
    assert model_server.requests == []


@pytest.fixture
async def arguing_node(llm_settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """Agents with three messages per thread; two disagreements escalate a thread."""
    llm_settings.agents.max_replies_per_thread = 3
    rule = {
        "name": "Consensus Failure",
        "conditions": [{"type": "disagreement_count", "threshold": 2}],
        "actions": [{"type": "notify_human", "target": "project_manager"}],
    }
    llm_settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(rule)]
    async with Node(llm_settings, bus=memory_bus) as running:
        yield running


async def test_agents_that_always_disagree_stop_at_the_reply_bound_and_the_thread_escalates(
    arguing_node: Node, model_server: ScriptedModelServer
) -> None:
    model_server.responder = Panel(disagreeing=frozenset({"reviewer"}))
    watcher = TaskWatcher(arguing_node)
    log = LogWatcher(arguing_node)
    server, _ = build_server(arguing_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        data = ARCHITECTURE | {"required_roles": ["reviewer"]}
        task_id = await assign(boss, "arch-1", "architecture_analysis", data)
        async with asyncio.timeout(30):
            assert await watcher.finished(task_id) == "failed"
            inbox = await call(boss, "bzzz_get", address="bzzz://boss/inbox")
            [failed] = [
                m for m in inbox["content"]["messages"] if m["message_type"] == "task_failed"
            ]
            thread_id = failed["content"]["thread_id"]
            await log.first(lambda e: e.type == "thread.escalated")
        thread = await call(boss, "bzzz_get", address=f"bzzz://arch-1/threads/{thread_id}")

    assert failed["content"]["code"] == "NO_CONSENSUS"
    assert "agents.max_replies_per_thread" in failed["content"]["error"]
    assert thread["content"]["thread"]["status"] == "escalated"
    messages = log.thread_messages(thread_id)
    senders = [m["sender"] for m in messages if m["message_type"] != "task_progress"]
    assert (senders.count("arch-1"), senders.count("rev-1")) == (3, 3)
    stances = [m.get("stance") for m in messages if m["sender"] == "rev-1" and m["reply_to"]]
    assert stances == ["disagree", "disagree"]
    escalations = await arguing_node.escalations.list()
    assert [e.thread_id for e in escalations] == [thread_id]


@pytest.fixture
async def expert_node(llm_settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A disagreement asks for an expert in security analysis (the hosted reviewer)."""
    rule = {
        "name": "Ask an expert",
        "conditions": [{"type": "disagreement_count", "threshold": 1}],
        "actions": [{"type": "request_expert", "expertise": ["security_analysis"]}],
    }
    llm_settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(rule)]
    async with Node(llm_settings, bus=memory_bus) as running:
        yield running


def _from(agent_id: str, thread_id: str) -> Any:
    def match(env: Envelope) -> bool:
        p = env.payload
        return env.type == "message.posted" and (p["sender"], p["thread_id"]) == (
            agent_id,
            thread_id,
        )

    return match


async def test_a_hosted_agent_invited_by_request_expert_answers_the_open_decision(
    expert_node: Node, model_server: ScriptedModelServer
) -> None:
    model_server.responder = Panel()
    log = LogWatcher(expert_node)
    server, _ = build_server(expert_node)
    async with Client(server, mode="legacy") as ana, Client(server, mode="legacy") as bob:
        await call(ana, "bzzz_announce", agent_id="ana", role="developer")
        await call(bob, "bzzz_announce", agent_id="bob", role="developer")
        created = await call(
            ana, "bzzz_thread", action="create", participants=["bob"], topic="token storage"
        )
        thread_id = created["thread_id"]
        decision = await call(
            ana,
            "bzzz_post",
            target_address="bzzz://*",
            thread_id=thread_id,
            message_type="decision",
            content={"decision": "store tokens as salted hashes"},
        )
        await call(
            bob,
            "bzzz_post",
            target_address="bzzz://*",
            thread_id=thread_id,
            message_type="text",
            content={"text": "plain hashes are enough"},
            reply_to=decision["message_id"],
            stance="disagree",
        )
        async with asyncio.timeout(20):
            answer = await log.first(_from("rev-1", thread_id))

    joined = next(e for e in log.envelopes if e.type == "thread.joined")
    assert joined.payload["agent_id"] == "rev-1" and joined.payload["invited_by"]
    assert (answer.payload["reply_to"], answer.payload["stance"]) == (
        decision["message_id"],
        "agree",
    )
    [prompt] = [b for b in model_server.requests if role_of(b) == "reviewer"]
    lines = [_text(m) for m in prompt["messages"] if m["role"] == "user"]
    # The thread's history, then the decision it was asked in to take a stance on.
    assert lines[:-1] == ["[bob]: plain hashes are enough"]
    assert lines[-1].startswith("Answer this decision from ana (invited by esc-")
    assert "store tokens as salted hashes" in lines[-1]


async def test_progress_messages_with_partial_text_arrive_before_the_result(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    text = "A long answer that streams in many pieces. " * 20
    model_server.push(Step(content=text))
    log = LogWatcher(hosted_node)
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        data = {"messages": [{"role": "user", "content": "Explain the log."}]}
        task_id = await assign(boss, "arch-1", "chat_completion", data)
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"

    to_boss = [(m["message_type"], m["content"]) for m in log.messages_to("boss")]
    kinds = [kind for kind, _ in to_boss]
    assert kinds[-1] == "task_complete" and "task_progress" in kinds
    partial = [c["partial_text"] for k, c in to_boss if k == "task_progress"]
    assert partial and all(text.startswith(p) and p for p in partial)
    assert model_server.requests[0]["stream"] is True


async def collaborate(boss: Client, watcher: TaskWatcher, log: LogWatcher) -> None:
    data = ARCHITECTURE | {"required_roles": ["reviewer"]}
    task_id = await assign(boss, "arch-1", "architecture_analysis", data)
    async with asyncio.timeout(30):
        assert await watcher.finished(task_id) == "completed"
        await log.first(lambda e: e.type == "knowledge.recorded")


async def solo(boss: Client, watcher: TaskWatcher, project: str) -> str:
    data = {
        "messages": [{"role": "user", "content": "How many JetStream replicas for the log?"}],
        "project": project,
    }
    task_id = await assign(boss, "arch-1", "chat_completion", data)
    async with asyncio.timeout(10):
        assert await watcher.finished(task_id) == "completed"
    return task_id


async def test_a_project_knows_its_consensus_and_no_other_project_sees_it(
    hosted_node: Node, model_server: ScriptedModelServer, watcher: TaskWatcher
) -> None:
    model_server.responder = Panel()
    log = LogWatcher(hosted_node)
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        await collaborate(boss, watcher, log)
        before = len(model_server.requests)
        await solo(boss, watcher, "garden")
        garden = model_server.requests[before:]
        before = len(model_server.requests)
        await solo(boss, watcher, "shop")
        shop = model_server.requests[before:]

    def seen(bodies: list[dict[str, Any]]) -> str:
        return "\n".join(_text(m) for body in bodies for m in body["messages"])

    assert "SHOP-DECISION-77" not in seen(garden)
    assert "What this project knows" in seen(shop)
    assert "SHOP-DECISION-77" in seen(shop)


@pytest.fixture
async def eager_node(llm_settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """Architecture tasks (complexity 0.6 and up) pass this node's collaboration threshold."""
    llm_settings.agents.collaboration_threshold = 0.5
    async with Node(llm_settings, bus=memory_bus) as running:
        yield running


async def test_a_complex_task_collaborates_with_the_roles_that_have_someone_available(
    eager_node: Node, model_server: ScriptedModelServer
) -> None:
    model_server.responder = Panel()
    watcher = TaskWatcher(eager_node)
    server, _ = build_server(eager_node)
    async with Client(server, mode="legacy") as boss:
        await call(boss, "bzzz_announce", agent_id="boss", role="lead")
        task_id = await assign(boss, "arch-1", "architecture_analysis", ARCHITECTURE)
        async with asyncio.timeout(30):
            assert await watcher.finished(task_id) == "completed"
        tasks = await call(boss, "bzzz_get", address="bzzz://arch-1/tasks", max_history=10)
        [task] = [t for t in tasks["content"]["tasks"] if t["id"] == task_id]
        thread = await call(
            boss, "bzzz_get", address=f"bzzz://arch-1/threads/{task['result']['thread_id']}"
        )

    # The architecture review asks for another architect too; there is none, so the reviewer
    # alone reviews with arch-1.
    info = thread["content"]["thread"]
    assert info["participants"] == ["arch-1", "rev-1"]
    assert info["metadata"]["reviewers"] == {"reviewer": ["rev-1"]}
    assert task["result"]["content"] == RESULT


@pytest.fixture
async def deciding_node(llm_settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A disagreement opens a decision thread with a reviewer in it."""
    rule = {
        "name": "Decide it",
        "conditions": [{"type": "disagreement_count", "threshold": 1}],
        "actions": [{"type": "create_decision_thread", "participants": ["reviewer"]}],
    }
    llm_settings.conversation.escalation_rules = [EscalationRuleConfig.model_validate(rule)]
    async with Node(llm_settings, bus=memory_bus) as running:
        yield running


async def test_a_hosted_agent_in_a_decision_thread_an_escalation_opened_speaks_up(
    deciding_node: Node, model_server: ScriptedModelServer
) -> None:
    model_server.responder = Panel()
    log = LogWatcher(deciding_node)
    server, _ = build_server(deciding_node)
    async with Client(server, mode="legacy") as ana, Client(server, mode="legacy") as bob:
        await call(ana, "bzzz_announce", agent_id="ana", role="developer")
        await call(bob, "bzzz_announce", agent_id="bob", role="developer")
        created = await call(
            ana, "bzzz_thread", action="create", participants=["bob"], topic="token storage"
        )
        decision = await call(
            ana,
            "bzzz_post",
            target_address="bzzz://*",
            thread_id=created["thread_id"],
            message_type="decision",
            content={"decision": "store tokens as salted hashes"},
        )
        await call(
            bob,
            "bzzz_post",
            target_address="bzzz://*",
            thread_id=created["thread_id"],
            message_type="text",
            content={"text": "plain hashes are enough"},
            reply_to=decision["message_id"],
            stance="disagree",
        )
        async with asyncio.timeout(20):
            opened = await log.first(
                lambda e: (
                    e.type == "thread.created" and e.payload["metadata"].get("kind") == "decision"
                )
            )
            answer = await log.first(_from("rev-1", opened.payload["thread_id"]))

    assert "rev-1" in opened.payload["participants"]
    assert answer.payload["content"]["text"].startswith("Findings of the reviewer")
    [prompt] = [b for b in model_server.requests if role_of(b) == "reviewer"]
    assert asked(prompt).startswith("You were asked into this thread (a decision thread of esc-")
