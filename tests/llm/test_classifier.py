"""With a model: a reply's stance is read from its text, and insights of a consensus drawn."""

from __future__ import annotations

from typing import Any

from bzzz.config import EscalationRuleConfig, Settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.llm.classifier import parse_stance
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

from .conftest import use_model

SPLIT = EscalationRuleConfig.model_validate(
    {
        "name": "split",
        "conditions": [{"type": "disagreement_count", "threshold": 1}],
        "actions": [{"type": "notify_human", "target": "project_manager"}],
    }
)


async def say(node: Node, agent: str, thread_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return await node.conversations.post(
        Caller(f"session-{agent}"),
        PostInput(
            target_address="bzzz://*",
            message_type="text",
            content={"text": text},
            thread_id=thread_id,
            **extra,
        ),
    )


async def debate(node: Node) -> tuple[str, dict[str, Any]]:
    """Ann proposes, Bob answers without declaring a stance; returns the thread and Bob's reply."""
    for agent, role in (("ann", "architect"), ("bob", "reviewer")):
        await node.agents.announce(
            Caller(f"session-{agent}"), AnnounceInput(agent_id=agent, role=role)
        )
    created = await node.conversations.thread(
        Caller("session-ann"), ThreadInput(action="create", participants=["bob"], topic="queue")
    )
    thread_id: str = created["thread_id"]
    proposal = await say(node, "ann", thread_id, "We should use Kafka for the event log.")
    reply = await say(
        node,
        "bob",
        thread_id,
        "Kafka is far too heavy for two cores; that would be a mistake.",
        reply_to=proposal["message_id"],
    )
    return thread_id, reply


async def thread_view(node: Node, thread_id: str) -> dict[str, Any]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://ann/threads/{thread_id}"))
    view: dict[str, Any] = got["content"]["thread"]
    return view


async def test_a_reply_without_a_declared_stance_is_classified_and_counted_as_a_disagreement(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    settings.conversation.escalation_rules = [SPLIT]
    model_server.push(Step(content="disagree", usage=(80, 1)))
    async with Node(settings, bus=memory_bus) as node:
        thread_id, reply = await debate(node)
        view = await thread_view(node, thread_id)
        usage = await node.llm.usage()

    [asked] = model_server.requests
    shown = asked["messages"][-1]["content"]
    assert "We should use Kafka for the event log." in shown
    assert "far too heavy" in shown
    [reaction] = [r for m in view["messages"] for r in m["reactions"]]
    assert (reaction["agent_id"], reaction["stance"], reaction["source"]) == (
        "bob",
        "disagree",
        "model",
    )
    assert reaction["message_id"] == reply["message_id"]
    assert view["status"] == "escalated"
    assert "1 disagreements" in view["escalation_history"][0]["reason"]
    assert usage["daily"]["models"]["gpt-5"]["calls"] == 1


async def test_when_the_model_fails_the_reply_takes_no_stance_and_is_still_posted(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server, max_retries=0)
    settings.conversation.escalation_rules = [SPLIT]
    model_server.push(Step(status=500))
    async with Node(settings, bus=memory_bus) as node:
        thread_id, reply = await debate(node)
        view = await thread_view(node, thread_id)

    assert reply["success"] is True
    assert len(model_server.requests) == 1
    assert [r for m in view["messages"] for r in m["reactions"]] == []
    assert view["status"] == "active"


async def test_a_stance_at_the_cost_limit_is_not_asked_for(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    settings.cost.daily_limit = 0.0000001
    async with Node(settings, bus=memory_bus) as node:
        thread_id, _ = await debate(node)
        view = await thread_view(node, thread_id)

    assert model_server.requests == []
    assert view["status"] == "active"


def test_only_a_first_word_of_agree_or_disagree_is_a_stance() -> None:
    assert parse_stance("Disagree.") == "disagree"
    assert parse_stance("  agree") == "agree"
    assert parse_stance("none") is None
    assert parse_stance("I disagree") is None
    assert parse_stance("") is None


async def test_the_insights_of_a_consensus_are_drawn_by_the_model(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server)
    model_server.push(
        Step(content="- A queue on two cores must stay light.\n- NATS JetStream fits.\n")
    )
    async with Node(settings, bus=memory_bus) as node:
        thread_id, _ = await debate_settled(node)
        [stored] = await node.consensus.events()

    [asked] = model_server.requests
    assert "We use NATS JetStream." in asked["messages"][-1]["content"]
    assert stored.thread_id == thread_id
    assert stored.event["context"]["insights"] == [
        "We use NATS JetStream.",
        "A queue on two cores must stay light.",
        "NATS JetStream fits.",
    ]


async def test_without_a_model_answer_the_insights_are_extracted(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> None:
    use_model(settings, model_server, max_retries=0)
    model_server.push(Step(status=500))
    async with Node(settings, bus=memory_bus) as node:
        await debate_settled(node)
        [stored] = await node.consensus.events()

    assert len(model_server.requests) == 1
    assert "We use NATS JetStream." in stored.event["context"]["insights"]


async def debate_settled(node: Node) -> tuple[str, dict[str, Any]]:
    """Ann decides, Bob declares his agreement: a consensus (no stance left to classify)."""
    for agent, role in (("ann", "architect"), ("bob", "reviewer")):
        await node.agents.announce(
            Caller(f"session-{agent}"), AnnounceInput(agent_id=agent, role=role)
        )
    created = await node.conversations.thread(
        Caller("session-ann"), ThreadInput(action="create", participants=["bob"], topic="queue")
    )
    thread_id: str = created["thread_id"]
    decision = await node.conversations.post(
        Caller("session-ann"),
        PostInput(
            target_address="bzzz://*",
            message_type="decision",
            content={"text": "We use NATS JetStream."},
            thread_id=thread_id,
        ),
    )
    last = await say(
        node, "bob", thread_id, "Yes.", reply_to=decision["message_id"], stance="agree"
    )
    assert last["consensus"]["decisions"] == ["We use NATS JetStream."]
    return thread_id, last
