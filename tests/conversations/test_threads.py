"""bzzz_thread: create, join, leave, list and summarize threaded conversations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bzzz.config import Settings
from bzzz.errors import AgentNotFound, InvalidParameters, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput, validate_input


async def announce(node: Node, agent_id: str, role: str) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role)
    )


async def thread(node: Node, agent_id: str, action: str, **params: Any) -> dict[str, Any]:
    return await node.conversations.thread(
        Caller(f"session-{agent_id}"), ThreadInput(action=action, **params)
    )


async def say(
    node: Node, agent_id: str, thread_id: str, kind: str, text: str, reply_to: str | None = None
) -> str:
    posted = await node.conversations.post(
        Caller(f"session-{agent_id}"),
        PostInput(
            target_address="bzzz://*",
            message_type=kind,
            content={"text": text},
            thread_id=thread_id,
            reply_to=reply_to,
        ),
    )
    message_id: str = posted["message_id"]
    return message_id


@pytest.fixture
async def team(node: Node) -> Node:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    return node


@pytest.fixture
async def one_thread_node(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A node on a network that allows one active thread."""
    settings.conversation.max_active_threads = 1
    async with Node(settings, bus=memory_bus) as running:
        await announce(running, "arch", "architect")
        await announce(running, "dev", "developer")
        yield running


async def test_create_opens_a_thread_with_the_creator_as_participant(team: Node) -> None:
    result = await thread(team, "arch", "create", participants=["dev"], topic="API Design Review")

    assert result["success"] is True
    assert result["action"] == "create"
    created = result["result"]
    assert result["thread_id"] == created["id"]
    assert created["id"].startswith("thread-")
    assert created["topic"] == "API Design Review"
    assert created["participants"] == ["arch", "dev"]
    assert created["creator"] == "arch"
    assert created["status"] == "active"
    assert created["created_at"].endswith("Z")


@pytest.mark.parametrize(
    ("action", "params", "missing"),
    [
        ("create", {"topic": "API"}, ["participants"]),
        ("create", {"participants": ["dev"]}, ["topic"]),
        ("create", {}, ["participants", "topic"]),
        ("join", {}, ["thread_id"]),
        ("leave", {}, ["thread_id"]),
        ("summarize", {}, ["thread_id"]),
    ],
)
async def test_a_missing_conditional_parameter_is_named(
    team: Node, action: str, params: dict[str, Any], missing: list[str]
) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await thread(team, "arch", action, **params)

    assert caught.value.details["missing"] == missing
    for name in missing:
        assert name in caught.value.message
    assert (await thread(team, "arch", "list"))["result"] == []


def test_an_unknown_action_is_refused_by_validation() -> None:
    with pytest.raises(InvalidParameters) as caught:
        validate_input(ThreadInput, {"action": "archive"})

    assert "'action'" in caught.value.message


async def test_creating_with_an_unknown_participant_is_agent_not_found(team: Node) -> None:
    with pytest.raises(AgentNotFound) as caught:
        await thread(team, "arch", "create", participants=["dev", "ghost"], topic="API")

    assert "ghost" in caught.value.message
    assert (await thread(team, "arch", "list"))["result"] == []


async def test_a_session_without_an_agent_cannot_create_a_thread(team: Node) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await thread(team, "nobody", "create", participants=["dev"], topic="API")

    assert "bzzz_announce" in caught.value.message


async def test_join_adds_the_agent_and_leave_removes_it(team: Node) -> None:
    thread_id = (await thread(team, "arch", "create", participants=["dev"], topic="API"))[
        "thread_id"
    ]

    joined = await thread(team, "rev", "join", thread_id=thread_id)
    left = await thread(team, "dev", "leave", thread_id=thread_id)

    assert joined["result"]["participants"] == ["arch", "dev", "rev"]
    assert left["thread_id"] == thread_id
    assert left["result"]["participants"] == ["arch", "rev"]
    assert left["result"]["former_participants"] == ["dev"]


async def test_a_rejoining_agent_receives_posts_again(team: Node) -> None:
    thread_id = (await thread(team, "arch", "create", participants=["dev"], topic="API"))[
        "thread_id"
    ]
    await thread(team, "dev", "leave", thread_id=thread_id)
    await thread(team, "dev", "join", thread_id=thread_id)

    await say(team, "arch", thread_id, "text", "welcome back")

    got = await team.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/inbox"))
    assert [m["content"]["text"] for m in got["content"]["messages"]] == ["welcome back"]


async def test_leaving_a_thread_one_is_not_in_is_refused(team: Node) -> None:
    thread_id = (await thread(team, "arch", "create", participants=["dev"], topic="API"))[
        "thread_id"
    ]

    with pytest.raises(InvalidParameters) as caught:
        await thread(team, "rev", "leave", thread_id=thread_id)

    assert "not in thread" in caught.value.message


async def test_joining_an_unknown_thread_is_thread_not_found(team: Node) -> None:
    with pytest.raises(ThreadNotFound):
        await thread(team, "rev", "join", thread_id="thread-nope")


async def test_list_shows_the_agents_threads_with_their_message_counts(team: Node) -> None:
    first = (await thread(team, "arch", "create", participants=["dev"], topic="API"))["thread_id"]
    await thread(team, "arch", "create", participants=["rev"], topic="Docs")
    await say(team, "dev", first, "text", "I have a question about the API")
    await say(team, "arch", first, "text", "Ask away")

    listed = await thread(team, "dev", "list")

    assert listed["action"] == "list"
    assert "thread_id" not in listed
    [only] = listed["result"]
    assert (only["id"], only["topic"], only["message_count"]) == (first, "API", 2)
    assert only["participants"] == ["arch", "dev"]
    assert only["status"] == "active"
    assert {t["topic"] for t in (await thread(team, "arch", "list"))["result"]} == {"API", "Docs"}


async def test_max_active_threads_is_enforced(one_thread_node: Node) -> None:
    await thread(one_thread_node, "arch", "create", participants=["dev"], topic="first")

    with pytest.raises(InvalidParameters) as caught:
        await thread(one_thread_node, "dev", "create", participants=["arch"], topic="second")

    assert "maxActiveThreads (1)" in caught.value.message
    assert [t["topic"] for t in (await thread(one_thread_node, "dev", "list"))["result"]] == [
        "first"
    ]


async def test_summarize_reports_participants_decisions_and_open_questions(team: Node) -> None:
    thread_id = (
        await thread(team, "arch", "create", participants=["dev", "rev"], topic="API Design")
    )["thread_id"]
    await say(team, "arch", thread_id, "text", "We need to pick a protocol for the public API.")
    answered = await say(team, "dev", thread_id, "question", "Should the API use REST or gRPC?")
    await say(team, "arch", thread_id, "text", "REST, clients are browsers.", reply_to=answered)
    await say(team, "rev", thread_id, "question", "Who owns the API versioning policy?")
    await say(team, "arch", thread_id, "decision", "The public API uses REST with JSON bodies.")

    result = await thread(team, "dev", "summarize", thread_id=thread_id)

    summary = result["result"]
    assert result["thread_id"] == thread_id
    assert summary["participants"] == ["arch", "dev", "rev"]
    assert summary["message_count"] == 5
    assert [d["text"] for d in summary["decisions"]] == [
        "The public API uses REST with JSON bodies."
    ]
    assert summary["decisions"][0]["by"] == "arch"
    assert [q["text"] for q in summary["open_questions"]] == ["Who owns the API versioning policy?"]
    assert summary["summary"].startswith("Thread 'API Design' (active): 5 messages")
    assert "1 decisions" in summary["summary"]
    assert "1 open questions" in summary["summary"]
    assert summary["messages_by_participant"] == {"arch": 3, "dev": 1, "rev": 1}


async def test_a_summary_is_kept_on_the_thread(team: Node) -> None:
    thread_id = (await thread(team, "arch", "create", participants=["dev"], topic="API"))[
        "thread_id"
    ]
    await say(team, "arch", thread_id, "decision", "We ship the REST API first.")

    summary = (await thread(team, "arch", "summarize", thread_id=thread_id))["result"]["summary"]

    got = await team.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://*/threads/{thread_id}"))
    assert got["content"]["thread"]["summary"] == summary
    assert "REST API" in summary


async def test_summarizing_an_empty_thread_says_so(team: Node) -> None:
    thread_id = (await thread(team, "arch", "create", participants=["dev"], topic="Quiet"))[
        "thread_id"
    ]

    summary = (await thread(team, "arch", "summarize", thread_id=thread_id))["result"]

    assert summary["message_count"] == 0
    assert summary["decisions"] == []
    assert summary["open_questions"] == []
    assert summary["summary"].startswith("Thread 'Quiet' (active): 0 messages")


async def test_summarizing_an_unknown_thread_is_thread_not_found(team: Node) -> None:
    with pytest.raises(ThreadNotFound):
        await thread(team, "arch", "summarize", thread_id="thread-nope")
