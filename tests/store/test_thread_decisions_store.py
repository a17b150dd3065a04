"""Escalations, stances, consensus and SLURP events on both databases (JSON, booleans, joins)."""

from __future__ import annotations

from bzzz.config import EscalationRuleConfig
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

SPLIT = EscalationRuleConfig.model_validate(
    {
        "name": "split",
        "conditions": [{"type": "disagreement_count", "threshold": 1}],
        "actions": [{"type": "notify_human"}],
    }
)


async def post(node: Node, agent: str, thread_id: str, text: str, **extra: str) -> str:
    posted = await node.conversations.post(
        Caller(agent),
        PostInput(
            target_address="bzzz://*",
            message_type=extra.pop("kind", "text"),
            content={"text": text},
            thread_id=thread_id,
            **extra,
        ),
    )
    message_id: str = posted["message_id"]
    return message_id


async def test_a_thread_escalates_resolves_and_reaches_consensus_on_both_databases(
    store_node: Node,
) -> None:
    node = store_node
    node.escalations.rules = [SPLIT]
    for agent, role in (("arch", "architect"), ("dev", "developer")):
        await node.agents.announce(Caller(agent), AnnounceInput(agent_id=agent, role=role))
    created = await node.conversations.thread(
        Caller("arch"), ThreadInput(action="create", topic="Queue", participants=["dev"])
    )
    thread_id = created["thread_id"]
    first = await post(node, "arch", thread_id, "Use Kafka.", kind="decision")
    await post(node, "dev", thread_id, "No.", reply_to=first, stance="disagree")
    await node.escalations.run_actions()
    await node.conversations.thread(
        Caller("arch"), ThreadInput(action="resolve", thread_id=thread_id, reason="use NATS")
    )
    second = await post(node, "arch", thread_id, "Use NATS.", kind="decision")
    await post(node, "dev", thread_id, "Yes.", reply_to=second, stance="agree")
    report = await node.monitor.sweep()  # every sweep query, on both databases
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://arch/threads/{thread_id}"))
    [slurp] = await node.consensus.events()

    view = got["content"]["thread"]
    assert view["status"] == "completed"
    [escalation] = view["escalation_history"]
    assert (escalation["rule"], escalation["resolved"]) == ("split", True)
    assert escalation["actions"][0]["status"] == "done"
    assert view["consensus"]["decisions"] == ["Use NATS."]
    assert [e.get("status", e.get("kind")) for e in view["decision_log"]] == [
        "proposed",
        "resolution",
        "agreed",
    ]
    assert (slurp.thread_id, slurp.status) == (thread_id, "stored")
    assert (report.closed, report.fired) == (0, 0)
