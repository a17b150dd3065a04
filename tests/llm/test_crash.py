"""A node that crashes (or fails to start) leaves no hosted-agent work running."""

from __future__ import annotations

from mcp import Client

from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.node.core import Node

from .test_runtime import assign, call


async def test_a_crash_cancels_the_hosted_agents_work_in_progress(
    hosted_node: Node, model_server: ScriptedModelServer
) -> None:
    # The model asks for a long pause: the task stays in progress until something stops it.
    model_server.push(Step(status=429, headers={"Retry-After": "60"}))
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as client:
        await call(client, "bzzz_announce", agent_id="lead", role="lead")
        await assign(client, "arch-1", "chat_completion", {"messages": [
            {"role": "user", "content": "hello"}]})  # fmt: skip
        await model_server.wait_for_requests(1)
        assert hosted_node.hosted.status()["tasks_in_progress"] == 1
    await hosted_node.crash()
    assert hosted_node.hosted.status()["tasks_in_progress"] == 0
