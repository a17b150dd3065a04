"""bzzz_thread summarize: written by the model when there is one, extractive otherwise."""

from __future__ import annotations

from bzzz.config import Settings
from bzzz.eventlog import Caller
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput

from .conftest import use_model


async def summarize(node: Node) -> dict[str, object]:
    a, b = Caller("a"), Caller("b")
    await node.agents.announce(a, AnnounceInput(agent_id="ann", role="architect"))
    await node.agents.announce(b, AnnounceInput(agent_id="bob", role="reviewer"))
    created = await node.conversations.thread(
        a, ThreadInput(action="create", participants=["bob"], topic="storage")
    )
    thread_id = created["thread_id"]
    for caller, text in ((a, "We should store events in JetStream."), (b, "Agreed, with R3.")):
        await node.conversations.post(
            caller,
            PostInput(
                target_address="bzzz://*",
                message_type="text",
                content={"text": text},
                thread_id=thread_id,
            ),
        )
    result = await node.conversations.thread(
        a, ThreadInput(action="summarize", thread_id=thread_id)
    )
    summary: dict[str, object] = result["result"]
    return summary


async def test_the_model_writes_the_summary_when_one_is_configured(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    model_server.push(Step(content="Ann and Bob chose JetStream with R3.", usage=(300, 12)))
    async with Node(settings, bus=memory_bus) as node:
        summary = await summarize(node)
        usage = await node.llm.usage()

    assert summary["method"] == "model"
    assert summary["summary"] == "Ann and Bob chose JetStream with R3."
    assert summary["message_count"] == 2
    [sent] = model_server.requests
    assert "We should store events in JetStream." in sent["messages"][-1]["content"]
    assert usage["daily"]["apiCalls"] == 1


async def test_without_a_model_the_summary_is_extractive(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    async with Node(settings, bus=memory_bus) as node:
        summary = await summarize(node)

    assert summary["method"] == "extractive"
    assert "storage" in str(summary["summary"])


async def test_when_the_model_fails_the_extractive_summary_is_kept(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server, max_retries=0)
    model_server.push(Step(status=500))
    async with Node(settings, bus=memory_bus) as node:
        summary = await summarize(node)

    assert summary["method"] == "extractive"
    assert summary["model_unavailable"] == "OPENAI_ERROR"
