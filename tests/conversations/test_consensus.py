"""Stances, the decision log and consensus; the SLURP context event reaches its endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from admitted import admit

from bzzz.cli import main
from bzzz.clock import ManualClock
from bzzz.config import load_settings
from bzzz.domain import Reaction
from bzzz.errors import InvalidParameters
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.store.repository import Repository

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


# --- who submits a SLURP event: the node that completed the consensus, and only it ------------


@asynccontextmanager
async def second_node(
    memory_bus: InMemoryBus, clock: ManualClock, tmp_path: Path, **slurp: Any
) -> AsyncIterator[Node]:
    """Another node (its own identity and store) on the same log and clock."""
    other = load_settings(
        environ={},
        overrides={"node": {"data_dir": str(tmp_path / "other")}, "slurp": slurp},
    )
    other.conversation.default_timeout = 10**7
    async with Node(other, bus=memory_bus, clock=clock) as node:
        yield node


async def caught_up(node: Node, memory_bus: InMemoryBus) -> None:
    await node.projector.wait_for_sequence(await memory_bus.last_sequence(), within=5)


async def test_only_the_node_that_completed_the_consensus_submits_its_slurp_event(
    make_node: NodeFactory,
    clock: ManualClock,
    memory_bus: InMemoryBus,
    tmp_path: Path,
    http_receiver: ReceiverFactory,
) -> None:
    async with (
        http_receiver(lambda _n: 200) as slurp,
        make_node(slurp={"url": slurp.url}) as origin,
        second_node(memory_bus, clock, tmp_path, url=slurp.url) as other,
    ):
        thread_id = await trio(origin)
        await agree_on_postgres(origin, thread_id)
        await caught_up(other, memory_bus)
        other_round = await other.monitor.sweep()
        origin_round = await origin.monitor.sweep()
        await caught_up(other, memory_bus)
        [on_origin] = await origin.consensus.events()
        [on_other] = await other.consensus.events()
        again = await origin.monitor.sweep()

    assert (other_round.slurp, origin_round.slurp, again.slurp) == (0, 1, 0)
    assert len(slurp.requests) == 1
    assert (on_origin.status, on_origin.attempts) == ("submitted", 1)
    assert on_other.id == on_origin.id
    assert (on_other.status, on_other.origin) == ("remote", origin.node_id)


async def test_a_missing_slurp_event_is_generated_only_by_the_node_that_owes_it(
    make_node: NodeFactory, clock: ManualClock, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    async with make_node() as origin, second_node(memory_bus, clock, tmp_path) as other:
        thread_id = await trio(origin)
        # As if the origin had stopped between the consensus and its SLURP event.
        origin.conversations.observers.remove(origin.consensus)
        await agree_on_postgres(origin, thread_id)
        await caught_up(other, memory_bus)
        await other.monitor.sweep()
        await caught_up(origin, memory_bus)
        before_origin = await origin.consensus.events()
        await origin.monitor.sweep()
        await caught_up(other, memory_bus)
        [generated] = await other.consensus.events()

    assert before_origin == []
    assert generated.origin == origin.node_id
    assert generated.status == "remote"


async def test_the_log_refuses_a_slurp_event_from_a_node_that_did_not_complete_the_consensus(
    make_node: NodeFactory, clock: ManualClock, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    async with make_node() as origin, second_node(memory_bus, clock, tmp_path) as other:
        origin.conversations.observers.remove(origin.consensus)
        # An admitted node: what the log refuses is its claim, not the node.
        await admit(origin, other)
        thread_id = await trio(origin)
        await agree_on_postgres(origin, thread_id)
        await caught_up(other, memory_bus)
        payload = {"event_id": "slurp-forged", "thread_id": thread_id, "event": {"x": 1}}
        outcome = await other.log.emit("slurp.generated", "slurp", thread_id, payload)
        await caught_up(origin, memory_bus)
        listed = await origin.consensus.events()

    assert outcome["ok"] is False
    assert "only the node that completed the consensus" in outcome["reason"]
    assert listed == []


async def test_a_node_that_replays_the_log_submits_nothing_again(
    make_node: NodeFactory,
    clock: ManualClock,
    memory_bus: InMemoryBus,
    tmp_path: Path,
    http_receiver: ReceiverFactory,
) -> None:
    async with http_receiver(lambda _n: 200) as slurp:
        async with make_node(slurp={"url": slurp.url}) as origin:
            thread_id = await trio(origin)
            await agree_on_postgres(origin, thread_id)
            await origin.monitor.follow_up()
        async with second_node(memory_bus, clock, tmp_path, url=slurp.url) as newcomer:
            await caught_up(newcomer, memory_bus)
            swept = await newcomer.monitor.sweep()
            [replayed] = await newcomer.consensus.events()

    assert swept.slurp == 0
    assert len(slurp.requests) == 1
    assert (replayed.thread_id, replayed.status) == (thread_id, "remote")


async def test_bzzz_slurp_lists_this_nodes_submission_status(
    make_node: NodeFactory, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line, whatever the terminal
    async with make_node() as node:
        thread_id = await trio(node)
        await agree_on_postgres(node, thread_id)
        await node.monitor.follow_up()
        data_dir = str(node.settings.node.data_dir)
        code = await asyncio.to_thread(main, ["--data-dir", data_dir, "slurp"])

    assert code == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if thread_id in line]
    assert "stored" in row
    assert "this node" in row


# --- the thread view reads only the stances of the messages it shows --------------------------


async def test_a_thread_view_reads_only_the_stances_of_the_messages_it_shows(
    make_node: NodeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    original = Repository.reactions

    async def counting(self: Repository, *args: Any, **kwargs: Any) -> list[Reaction]:
        found = await original(self, *args, **kwargs)
        read.append(len(found))
        return found

    async with make_node() as node:
        thread_id = await trio(node)
        decision = (await say(node, "arch", thread_id, "Use Kafka.", kind="decision"))["message_id"]
        for n in range(6):
            stance = "agree" if n % 2 else "disagree"
            await say(node, "dev", thread_id, f"Take {n}.", reply_to=decision, stance=stance)
        monkeypatch.setattr(Repository, "reactions", counting)
        recent = await thread_view(node, thread_id, max_history=2)
        everything = await thread_view(node, thread_id)

    assert read == [2, 6]
    assert [(m["content"], m["stance"]) for m in recent["messages"]] == [
        ("Take 4.", "disagree"),
        ("Take 5.", "agree"),
    ]
    on_decision = {m["id"]: m for m in everything["messages"]}[decision]["reactions"]
    assert [r["stance"] for r in on_decision] == ["disagree", "agree"] * 3
