"""Stances, the decision log and consensus; the SLURP context event reaches its endpoint."""

from __future__ import annotations

import pytest

from bzzz.clock import ManualClock
from bzzz.errors import InvalidParameters
from bzzz.node import Node

from .conftest import (
    NodeFactory,
    ReceiverFactory,
    announce,
    events_of,
    open_thread,
    say,
    thread_view,
    watch,
)


async def trio(node: Node) -> str:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    return await open_thread(node, "arch", "dev", "rev", topic="Storage engine")


async def agree_on_postgres(node: Node, thread_id: str) -> dict[str, object]:
    await say(node, "dev", thread_id, "Postgres has the features we need for reporting.")
    decision = await say(node, "arch", thread_id, "We use PostgreSQL.", kind="decision")
    await say(node, "dev", thread_id, "Yes.", reply_to=decision["message_id"], stance="agree")
    return await say(
        node, "rev", thread_id, "Agreed.", reply_to=decision["message_id"], stance="agree"
    )


async def test_when_every_participant_agrees_the_thread_records_consensus_and_completes(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        sub = await watch(node, "thread_consensus", "slurp_context")
        last = await agree_on_postgres(node, thread_id)
        view = await thread_view(node, thread_id)
        events = await events_of(node, sub)
        [stored] = await node.consensus.events()

    assert last["consensus"]["decisions"] == ["We use PostgreSQL."]
    assert view["status"] == "completed"
    consensus = view["consensus"]
    assert consensus["agreed_by"] == ["arch", "dev", "rev"]
    assert consensus["confidence"] == 1.0
    assert consensus["type"] == "unanimous"
    [decision] = view["decision_log"]
    assert decision["status"] == "agreed"
    assert sorted(decision["agreed"]) == ["arch", "dev", "rev"]
    assert [e["event_type"] for e in events] == ["thread_consensus", "slurp_context"]
    event = stored.event
    assert stored.thread_id == thread_id
    assert event["type"] == "agent_consensus"
    assert event["context"]["conversation_id"] == thread_id
    assert event["context"]["decision_points"] == ["We use PostgreSQL."]
    assert {"agent_id": "rev", "role": "reviewer"} in event["context"]["participants"]
    assert "We use PostgreSQL." in event["context"]["insights"]
    assert event["metadata"]["message_count"] == 4
    assert event["metadata"]["agent_count"] == 3


async def test_a_disagreement_holds_consensus_back_until_it_turns_into_agreement(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        decision = (await say(node, "arch", thread_id, "Use Kafka.", kind="decision"))["message_id"]
        await say(node, "dev", thread_id, "Fine.", reply_to=decision, stance="agree")
        await say(node, "rev", thread_id, "Too heavy.", reply_to=decision, stance="disagree")
        held = await thread_view(node, thread_id)
        await say(node, "rev", thread_id, "OK, convinced.", reply_to=decision, stance="agree")
        reached = await thread_view(node, thread_id)

    assert held["status"] == "active"
    assert held["decision_log"][0]["disagreed"] == ["rev"]
    stances = {m["id"]: m for m in held["messages"]}
    assert [r["stance"] for r in stances[decision]["reactions"]] == ["agree", "disagree"]
    assert reached["status"] == "completed"


async def test_a_consensus_event_reaches_the_slurp_endpoint_after_it_recovers(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    async with http_receiver(lambda n: 502 if n == 0 else 200) as slurp:
        settings = {"url": slurp.url, "initial_backoff": 5}
        async with make_node(slurp=settings) as node:
            thread_id = await trio(node)
            await agree_on_postgres(node, thread_id)
            first = await node.monitor.follow_up()
            [failed] = await node.consensus.events()
            clock.advance(5)
            second = await node.monitor.follow_up()
            [submitted] = await node.consensus.events()

    assert (first, second) == ((0, 1), (0, 1))
    assert (failed.status, failed.attempts, failed.last_error) == ("failed", 1, "HTTP 502")
    assert (submitted.status, submitted.attempts) == ("submitted", 2)
    received = slurp.requests[-1].json()
    assert received == submitted.event
    assert received["context"]["conversation_id"] == thread_id
    assert received["source"] == "bzzz_mcp_integration"


async def test_without_a_slurp_endpoint_events_are_stored(make_node: NodeFactory) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        await agree_on_postgres(node, thread_id)
        await node.monitor.follow_up()
        stored = await node.consensus.events("stored")

    assert [e.thread_id for e in stored] == [thread_id]


@pytest.mark.parametrize(
    ("reply", "stance", "problem"),
    [
        (None, "agree", "a stance needs reply_to"),
        ("other-thread", "agree", "is not a message of thread"),
        ("own", "disagree", "someone else's message"),
        ("msg-unknown", "agree", "is not a message of thread"),
    ],
)
async def test_a_stance_must_be_on_another_agents_message_of_the_thread(
    make_node: NodeFactory, reply: str | None, stance: str, problem: str
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        other = await open_thread(node, "arch", "dev", topic="Other")
        elsewhere = (await say(node, "dev", other, "Elsewhere."))["message_id"]
        own = (await say(node, "rev", thread_id, "Mine."))["message_id"]
        target = {"other-thread": elsewhere, "own": own}.get(reply or "", reply)
        with pytest.raises(InvalidParameters) as caught:
            await say(node, "rev", thread_id, "Hm.", reply_to=target, stance=stance)

    assert problem in caught.value.message


async def test_the_thread_shows_replies_stances_reactions_and_the_decision_log(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        decision = (await say(node, "arch", thread_id, "Ship Friday.", kind="decision"))[
            "message_id"
        ]
        reply = await say(node, "dev", thread_id, "Too soon.", reply_to=decision, stance="disagree")
        view = await thread_view(node, thread_id)

    by_id = {m["id"]: m for m in view["messages"]}
    answer = by_id[reply["message_id"]]
    assert (answer["replyTo"], answer["stance"]) == (decision, "disagree")
    [reaction] = by_id[decision]["reactions"]
    assert (reaction["agent_id"], reaction["stance"], reaction["source"]) == (
        "dev",
        "disagree",
        "agent",
    )
    assert view["decision_log"][0]["text"] == "Ship Friday."
    assert reply["stance"] == {"stance": "disagree", "source": "agent", "on": decision}


async def test_a_consensus_whose_slurp_event_was_not_generated_gets_it_at_the_next_sweep(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        # As if the node had stopped between the consensus and the SLURP event.
        node.conversations.observers.remove(node.consensus)
        await agree_on_postgres(node, thread_id)
        missing = await node.consensus.events()
        await node.monitor.sweep()
        generated = await node.consensus.events()
        await node.monitor.sweep()
        once = await node.consensus.events()

    assert missing == []
    assert [e.thread_id for e in generated] == [thread_id]
    assert len(once) == 1


class KeywordModel:
    """A stand-in for a hosted model: 'no' disagrees, 'yes' agrees."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def classify(self, text: str, target: str) -> str | None:
        self.calls.append((text, target))
        lowered = text.lower()
        if lowered.startswith("no"):
            return "disagree"
        return "agree" if lowered.startswith("yes") else None


async def test_with_a_model_configured_a_reply_without_a_declared_stance_is_classified(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        model = KeywordModel()
        node.conversations.classifier = model
        thread_id = await trio(node)
        decision = (await say(node, "arch", thread_id, "Use Redis.", kind="decision"))["message_id"]
        await say(node, "dev", thread_id, "No, it loses data.", reply_to=decision)
        await say(node, "rev", thread_id, "Maybe later.", reply_to=decision)
        await say(node, "rev", thread_id, "No reply_to: never classified.")
        declared = await say(node, "rev", thread_id, "No!", reply_to=decision, stance="agree")
        view = await thread_view(node, thread_id)

    [(text, target), _maybe] = model.calls
    assert (text, target) == ("No, it loses data.", "Use Redis.")
    reactions = {m["id"]: m for m in view["messages"]}[decision]["reactions"]
    assert [(r["agent_id"], r["stance"], r["source"]) for r in reactions] == [
        ("dev", "disagree", "model"),
        ("rev", "agree", "agent"),
    ]
    assert declared["stance"]["source"] == "agent"
    assert view["decision_log"][0]["disagreed"] == ["dev"]
