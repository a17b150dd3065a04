"""The main flows leave the same, readable state on SQLite and on PostgreSQL."""

from __future__ import annotations

from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import GetInput, LookupInput, PostInput, ThreadInput, validate_input

from .support import run_main_flows


async def test_agents_and_lookups(store_node: Node) -> None:
    await run_main_flows(store_node)

    found = await store_node.agents.lookup(
        LOCAL_CALLER,
        LookupInput(
            semantic_address="bzzz://*:*@api",
            filter_criteria={"expertise": ["python"], "performance_threshold": 0.9},
        ),
    )
    available = await store_node.agents.lookup(
        LOCAL_CALLER,
        LookupInput(semantic_address="bzzz://*", filter_criteria={"availability": True}),
    )

    assert [m["id"] for m in found["matches"]] == ["dev"]
    assert found["matches"][0]["performance"] > 0.9
    assert sorted(m["id"] for m in available["matches"]) == ["boss", "dev"]


async def test_tasks(store_node: Node) -> None:
    flows = await run_main_flows(store_node)

    dev = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/tasks"))
    rev = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://rev"))

    [done] = dev["content"]["tasks"]
    assert (done["id"], done["status"], done["type"]) == (flows.done_task, "completed", "code")
    assert done["result"] == {"pr": 7}
    assert done["progress"] == {"task_id": flows.done_task, "percent": 50}
    assert done["priority"] == "high"
    assert [t["id"] for t in rev["content"]["current_tasks"]] == [flows.open_task]
    assert rev["content"]["agent_info"]["status"] == "busy"


async def test_messages_and_inbox(store_node: Node) -> None:
    await run_main_flows(store_node)

    boss = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://boss/inbox"))

    kinds = [m["message_type"] for m in boss["content"]["messages"]]
    assert kinds == ["question", "task_complete", "task_progress"]


async def test_threads(store_node: Node) -> None:
    flows = await run_main_flows(store_node)

    listed = await store_node.conversations.thread(Caller("s-dev"), ThreadInput(action="list"))
    got = await store_node.agents.get(
        LOCAL_CALLER, GetInput(address=f"bzzz://*/threads/{flows.thread_id}")
    )
    summary = await store_node.conversations.thread(
        Caller("s-boss"), ThreadInput(action="summarize", thread_id=flows.thread_id)
    )

    [listing] = listed["result"]
    assert (listing["id"], listing["message_count"]) == (flows.thread_id, 2)
    thread = got["content"]["thread"]
    assert thread["participants"] == ["boss", "dev"]
    assert thread["former_participants"] == ["rev"]
    assert [m["messageType"] for m in thread["messages"]] == ["question", "decision"]
    assert thread["summary"] is not None
    result = summary["result"]
    assert result["open_questions"] == []
    assert [d["text"] for d in result["decisions"]] == ["We use REST for the public API."]


async def test_subscriptions_events_and_webhook_queue(store_node: Node) -> None:
    flows = await run_main_flows(store_node)

    collected = await store_node.subscriptions.events(LOCAL_CALLER, flows.subscription_id)
    deliveries = await store_node.subscriptions.deliveries()

    kinds = [e["event_type"] for e in collected["events"]]
    assert kinds == [
        "agent_announcement",
        "agent_announcement",
        "agent_announcement",
        "task_assignment",
        "task_assignment",
        "thread_created",
    ]
    sequences = [e["sequence"] for e in collected["events"]]
    assert sequences == sorted(sequences)
    assert len(deliveries) == 2
    assert {d.subscription_id for d in deliveries} == {flows.webhook_subscription_id}


async def test_a_long_task_type_is_clipped_and_the_store_keeps_working(store_node: Node) -> None:
    await run_main_flows(store_node)
    long_type = {"task_type": "t" * 200, "description": "d" * 10_000}

    assigned = await store_node.conversations.post(
        Caller("s-boss"),
        PostInput(target_address="bzzz://dev", message_type="task_assignment", content=long_type),
    )

    [task] = (await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev")))["content"][
        "current_tasks"
    ]
    assert task["id"] == assigned["tasks"]["dev"]
    assert task["type"] == "t" * 64
    assert task["description"] == "d" * 4000
    # The node still applies the log afterwards.
    after = await store_node.conversations.post(
        Caller("s-dev"), PostInput(target_address="bzzz://boss", message_type="text", content={})
    )
    assert after["delivery_results"]["recipients"] == ["boss"]


async def test_the_longest_reply_to_the_schema_allows_is_stored(store_node: Node) -> None:
    await run_main_flows(store_node)
    params = validate_input(
        PostInput,
        {
            "target_address": "bzzz://boss",
            "message_type": "text",
            "content": {},
            "reply_to": "m" * 64,
        },
    )

    await store_node.conversations.post(Caller("s-dev"), params)

    inbox = await store_node.agents.get(
        LOCAL_CALLER, GetInput(address="bzzz://boss/inbox", max_history=1)
    )
    assert inbox["content"]["messages"][0]["reply_to"] == "m" * 64
