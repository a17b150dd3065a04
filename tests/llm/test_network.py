"""Hosted agents on a network: work assigned from another node, the ledger seen everywhere."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from admitted import admit

from bzzz.cli import main
from bzzz.config import Settings, load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.llm.types import CompletionOptions
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput

from .conftest import use_model
from .support import TaskWatcher


async def test_a_task_from_another_node_is_done_here_and_seen_there(
    hosted_node: Node, model_server: ScriptedModelServer, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    model_server.push(Step(content="done remotely", usage=(10, 5)))
    other = load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / "b")}})
    async with Node(other, bus=memory_bus) as remote:
        await admit(hosted_node, remote)
        watcher = TaskWatcher(remote)
        boss = Caller("boss")
        await remote.agents.announce(boss, AnnounceInput(agent_id="boss", role="lead"))
        posted = await remote.conversations.post(
            boss,
            PostInput(
                target_address="bzzz://rev-1",
                message_type="task_assignment",
                content={
                    "task_type": "code_review",
                    "task_data": {"code": "print(1)", "language": "python"},
                },
            ),
        )
        task_id = posted["tasks"]["rev-1"]
        async with asyncio.timeout(10):
            assert await watcher.finished(task_id) == "completed"
        tasks = await remote.agents.get(LOCAL_CALLER, GetInput(address="bzzz://rev-1/tasks"))
        network = await remote.llm.usage(node_only=False)

    [task] = tasks["content"]["tasks"]
    assert task["result"]["content"] == "done remotely"
    # The remote node never called a model, yet its ledger holds the hosting node's call.
    assert network["daily"]["apiCalls"] == 1
    assert network["daily"]["tokens"]["total"] == 15


async def test_a_slow_answer_weighs_on_the_performance_score(hosted_node: Node) -> None:
    async def finish(agent_id: str, response_ms: int) -> float:
        caller = Caller(f"s-{agent_id}")
        await hosted_node.agents.announce(caller, AnnounceInput(agent_id=agent_id, role="dev"))
        boss = Caller("s-boss")
        if hosted_node.agents.directory.get("boss") is None:
            await hosted_node.agents.announce(boss, AnnounceInput(agent_id="boss", role="lead"))
        posted = await hosted_node.conversations.post(
            boss,
            PostInput(
                target_address=f"bzzz://{agent_id}",
                message_type="task_assignment",
                content={"task_type": "generic"},
            ),
        )
        await hosted_node.conversations.post(
            caller,
            PostInput(
                target_address="bzzz://boss",
                message_type="task_complete",
                content={"task_id": posted["tasks"][agent_id], "response_ms": response_ms},
            ),
        )
        got = await hosted_node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://{agent_id}"))
        performance: float = got["content"]["agent_info"]["performance"]
        return performance

    fast = await finish("fast", 2_000)
    slow = await finish("slow", 120_000)

    assert slow < fast
    # 120 s against a 30 s target would quarter the score; the floor keeps half of it.
    assert slow == pytest.approx(fast * 0.5, abs=1e-4)


async def test_bzzz_costs_shows_the_ledger(
    settings: Settings,
    model_server: ScriptedModelServer,
    memory_bus: InMemoryBus,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_model(settings, model_server)
    model_server.push(Step(content="x", usage=(100, 50), model="gpt-4o"))
    async with Node(settings, bus=memory_bus) as node:
        await node.llm.complete(
            CompletionOptions(messages=[{"role": "user", "content": "hi"}], model="gpt-4o")
        )

    data_dir = str(settings.node.data_dir)
    # The CLI runs its own event loop, as it does from a shell.
    assert await asyncio.to_thread(main, ["--data-dir", data_dir, "costs", "--json"]) == 0
    usage = json.loads(capsys.readouterr().out)
    assert await asyncio.to_thread(main, ["--data-dir", data_dir, "costs"]) == 0
    table = capsys.readouterr().out

    assert usage["daily"]["models"]["gpt-4o"]["calls"] == 1
    assert usage["monthly"]["tokens"]["total"] == 150
    assert "gpt-4o" in table and "total" in table


async def test_a_task_cut_off_by_a_restart_is_done_after_it(
    llm_settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    model_server.gate.clear()
    boss = Caller("boss")
    async with Node(llm_settings, bus=memory_bus) as node:
        await node.agents.announce(boss, AnnounceInput(agent_id="boss", role="lead"))
        posted = await node.conversations.post(
            boss,
            PostInput(
                target_address="bzzz://docs-1",
                message_type="task_assignment",
                content={
                    "task_type": "documentation",
                    "task_data": {"content": "x", "documentType": "guide", "audience": "ops"},
                },
            ),
        )
        task_id = posted["tasks"]["docs-1"]
        async with asyncio.timeout(10):
            await model_server.wait_for_requests(1)
    assert node.hosted.hosted["docs-1"].lifecycle.state.value == "terminating"

    # The request cut off by the stop still waits at the gate: answer every request alike.
    model_server.responder = lambda body: Step(content="the guide")
    model_server.gate.set()
    async with Node(llm_settings, bus=memory_bus) as again:
        watcher = TaskWatcher(again)
        await again.agents.announce(boss, AnnounceInput(agent_id="boss", role="lead"))
        async with asyncio.timeout(10):
            await watcher.finished(task_id)
        tasks = await again.agents.get(LOCAL_CALLER, GetInput(address="bzzz://docs-1/tasks"))

    [task] = tasks["content"]["tasks"]
    assert (task["status"], task["result"]["content"]) == ("completed", "the guide")
