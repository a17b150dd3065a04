"""Escalation actions that act: tell a human, invite experts and architects, open decisions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from bzzz.api.app import _metrics
from bzzz.cli import main
from bzzz.clock import ManualClock
from bzzz.config import Settings, load_settings
from bzzz.errors import ConfigError
from bzzz.events.webhooks import verify_signature
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .conftest import (
    NodeFactory,
    ReceiverFactory,
    announce,
    events_of,
    open_thread,
    rule,
    say,
    thread_view,
    watch,
)

STUCK = [{"type": "no_progress", "threshold": True, "timeframe": 600}]
SECRET = "human-channel-test-secret"


async def escalate(node: Node, clock: ManualClock) -> str:
    """Open a thread of arch and dev and let the 'stuck' rule fire on it."""
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    thread_id = await open_thread(node, "arch", "dev")
    clock.advance(601)
    await node.escalations.check_all()
    return thread_id


async def actions_of(node: Node, thread_id: str) -> list[dict[str, Any]]:
    view = await thread_view(node, thread_id)
    actions: list[dict[str, Any]] = view["escalation_history"][-1]["actions"]
    return actions


async def test_notify_human_posts_a_signed_webhook_and_sends_an_event(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    actions = [{"type": "notify_human", "target": "project_manager", "priority": "high"}]
    async with http_receiver(lambda _n: 200) as human:
        settings = {"human_channel_url": human.url, "human_channel_secret": SecretStr(SECRET)}
        async with make_node([rule("stuck", STUCK, actions)], escalation=settings) as node:
            sub = await watch(node, "human_notification")
            thread_id = await escalate(node, clock)
            ran = await node.escalations.run_actions()
            [action] = await actions_of(node, thread_id)
            events = await events_of(node, sub)

    assert ran == 1
    assert action["status"] == "done"
    assert action["result"]["delivered"] is True
    [request] = human.requests
    assert verify_signature(SECRET, request.headers["x-bzzz-signature"], request.body)
    body = request.json()
    assert body["target"] == "project_manager"
    assert body["escalation"]["threadId"] == thread_id
    assert body["escalation"]["rule"] == "stuck"
    assert body["thread"]["participants"] == ["arch", "dev"]
    [event] = events
    assert event["event_type"] == "human_notification"
    assert event["data"]["escalation"]["threadId"] == thread_id


async def test_a_human_channel_that_is_down_is_retried_until_it_answers(
    make_node: NodeFactory, clock: ManualClock, http_receiver: ReceiverFactory
) -> None:
    def down_twice(n: int) -> int:
        return 503 if n < 2 else 200

    async with http_receiver(down_twice) as human:
        settings = {
            "human_channel_url": human.url,
            "human_channel_secret": SecretStr(SECRET),
            "initial_backoff": 10,
            "max_backoff": 20,
        }
        async with make_node(
            [rule("stuck", STUCK, [{"type": "notify_human"}])], escalation=settings
        ) as node:
            thread_id = await escalate(node, clock)
            await node.escalations.run_actions()
            [first] = await actions_of(node, thread_id)
            not_due = await node.escalations.run_actions()
            clock.advance(10)
            await node.escalations.run_actions()
            [second] = await actions_of(node, thread_id)
            clock.advance(20)
            await node.escalations.run_actions()
            [third] = await actions_of(node, thread_id)
            metrics = await _metrics(node)

    assert (first["status"], first["attempts"], first["code"]) == ("failed", 1, "ESCALATION_FAILED")
    assert "HTTP 503" in first["error"]
    assert not_due == 0
    assert (second["status"], second["attempts"]) == ("failed", 2)
    assert (third["status"], third["attempts"], third["code"]) == ("done", 3, None)
    assert [r.status for r in human.requests] == [503, 503, 200]
    assert 'bzzz_escalation_actions_total{outcome="failed_attempt"} 2' in metrics
    assert 'bzzz_escalation_actions_total{outcome="done"} 1' in metrics
    assert "bzzz_thread_escalations_total 1" in metrics


async def test_without_a_human_channel_the_notification_is_listed_by_bzzz_escalations(
    make_node: NodeFactory,
    clock: ManualClock,
    capsys: Any,
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line, whatever the terminal
    async with make_node([rule("stuck", STUCK, [{"type": "notify_human"}])]) as node:
        thread_id = await escalate(node, clock)
        await node.escalations.run_actions()
        [action] = await actions_of(node, thread_id)
        data_dir = str(node.settings.node.data_dir)
        code = await asyncio.to_thread(main, ["--data-dir", data_dir, "escalations", "--open"])

    assert action["status"] == "done"
    assert action["result"] == {
        "delivered": False,
        "channel": None,
        "listed_by": "bzzz escalations",
    }
    assert code == 0
    listed = capsys.readouterr().out
    [row] = [line for line in listed.splitlines() if thread_id in line]
    assert "stuck" in row
    assert "notify_human: done (1x)" in row


async def test_request_expert_invites_the_best_available_agent_with_the_expertise(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "request_expert", "expertise": ["database"]}]
    async with make_node([rule("stuck", STUCK, actions)]) as node:
        await announce(node, "dba-busy", "expert", capabilities=["database"], max_tasks=1)
        await announce(node, "dba", "expert", capabilities=["database", "sql"])
        await announce(node, "web", "expert", capabilities=["css"])
        await _occupy(node, "dba-busy")
        thread_id = await escalate(node, clock)
        await node.escalations.run_actions()
        [action] = await actions_of(node, thread_id)
        view = await thread_view(node, thread_id)

    assert action["status"] == "done"
    assert action["result"] == {"invited": "dba", "expertise": ["database"]}
    assert view["participants"] == ["arch", "dev", "dba"]


async def _occupy(node: Node, agent_id: str) -> None:
    """Give an agent a task so that it is at its max_tasks."""
    from bzzz.eventlog import Caller
    from bzzz.schemas import PostInput

    await announce(node, "boss", "manager")
    await node.conversations.post(
        Caller("session-boss"),
        PostInput(
            target_address=f"bzzz://{agent_id}",
            message_type="task_assignment",
            content={"task_type": "work", "description": "keep busy"},
        ),
    )


async def test_an_expert_that_is_not_there_is_asked_again_once_it_comes(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "request_expert", "expertise": ["database"]}]
    async with make_node(
        [rule("stuck", STUCK, actions)], escalation={"initial_backoff": 30}
    ) as node:
        thread_id = await escalate(node, clock)
        await node.escalations.run_actions()
        [missing] = await actions_of(node, thread_id)
        await announce(node, "dba", "expert", capabilities=["database"])
        clock.advance(30)
        report = await node.monitor.sweep()
        [found] = await actions_of(node, thread_id)

    assert (missing["status"], missing["code"]) == ("failed", "ESCALATION_FAILED")
    assert "no available agent with expertise database" in missing["error"]
    assert report.actions == 1
    assert (found["status"], found["attempts"]) == ("done", 2)
    assert found["result"]["invited"] == "dba"


async def test_escalate_to_architect_invites_an_architect_from_outside_the_thread(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "escalate_to_architect", "priority": "high"}]
    async with make_node([rule("stuck", STUCK, actions)]) as node:
        await announce(node, "chief", "architect")
        thread_id = await escalate(node, clock)
        await node.escalations.run_actions()
        [action] = await actions_of(node, thread_id)
        view = await thread_view(node, thread_id)

    assert action["result"] == {"invited": "chief", "role": "architect"}
    assert "chief" in view["participants"]


async def test_create_decision_thread_opens_a_linked_thread_with_the_named_participants(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "create_decision_thread", "participants": ["senior_architect"]}]
    async with make_node([rule("split", STUCK, actions)]) as node:
        await announce(node, "sa", "senior_architect")
        thread_id = await escalate(node, clock)
        await node.escalations.run_actions()
        [action] = await actions_of(node, thread_id)
        again = await node.escalations.run_actions()
        decision = await thread_view(node, action["result"]["thread_id"])

    assert action["status"] == "done"
    assert again == 0
    assert decision["participants"] == ["arch", "dev", "sa"]
    assert decision["metadata"]["kind"] == "decision"
    assert decision["metadata"]["parent_thread_id"] == thread_id
    assert decision["shared_context"]["parent_thread_id"] == thread_id
    assert decision["topic"] == "Decision: API design"


async def test_a_consensus_in_the_decision_thread_resolves_the_escalation_that_opened_it(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    actions = [{"type": "create_decision_thread", "participants": ["senior_architect"]}]
    async with make_node([rule("split", STUCK, actions)]) as node:
        await announce(node, "sa", "senior_architect")
        thread_id = await escalate(node, clock)
        await node.escalations.run_actions()
        [action] = await actions_of(node, thread_id)
        decision_thread = action["result"]["thread_id"]
        decided = await say(node, "sa", decision_thread, "Use NATS.", kind="decision")
        for agent in ("arch", "dev"):
            await say(
                node, agent, decision_thread, "Yes.", reply_to=decided["message_id"], stance="agree"
            )
        parent = await thread_view(node, thread_id)

    assert parent["status"] == "active"
    [escalation] = parent["escalation_history"]
    assert escalation["resolved"] is True
    assert escalation["resolution"] == f"decided in {decision_thread}: Use NATS."


# --- a human channel whose signatures its receiver can check ------------------------------------


def test_a_human_channel_without_a_secret_is_a_config_error_naming_the_setting() -> None:
    environ = {"BZZZ_ESCALATION__HUMAN_CHANNEL_URL": "https://humans.example/hook"}
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=environ)

    assert "escalation.human_channel_secret" in caught.value.message
    assert "BZZZ_ESCALATION__HUMAN_CHANNEL_SECRET" in caught.value.message


def test_a_human_channel_with_its_secret_loads() -> None:
    environ = {
        "BZZZ_ESCALATION__HUMAN_CHANNEL_URL": "https://humans.example/hook",
        "BZZZ_ESCALATION__HUMAN_CHANNEL_SECRET": SECRET,
    }
    escalation = load_settings(environ=environ).escalation

    assert escalation.human_channel_secret is not None
    assert escalation.human_channel_secret.get_secret_value() == SECRET


async def test_a_node_with_a_human_channel_but_no_secret_refuses_to_start(
    settings: Settings, memory_bus: InMemoryBus
) -> None:
    settings.escalation.human_channel_url = "https://humans.example/hook"
    with pytest.raises(ConfigError) as caught:
        async with Node(settings, bus=memory_bus):
            pass

    assert "escalation.human_channel_secret" in caught.value.message
