"""When a hosted agent answers a thread, and what its answer becomes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from bzzz import domain
from bzzz.config import Settings
from bzzz.llm.participation import ThreadWatch, answered, parse_answer, reason_to_answer
from bzzz.llm.progress import ProgressReporter
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node

from .support import LogWatcher

NOW = domain.utcnow()


def message(
    id_: str, sender: str, type_: str = "text", reply_to: str | None = None, **content: Any
) -> domain.Message:
    return domain.Message(
        id=id_,
        sender=sender,
        target_address="bzzz://*",
        message_type=type_,
        content=content or {"text": "hello"},
        priority="medium",
        thread_id="thread-1",
        reply_to=reply_to,
        recipients=[],
        posted_at=NOW,
    )


def thread(decisions: list[dict[str, Any]] | None = None) -> domain.Thread:
    return domain.Thread(
        id="thread-1",
        topic="storage",
        creator="ana",
        status="active",
        created_at=NOW,
        last_activity=NOW,
        message_count=1,
        summary=None,
        metadata={},
        escalation_history=[],
        decision_log=decisions or [],
    )


def proposed(message_id: str, agreed: list[str], disagreed: list[str] = []) -> dict[str, Any]:  # noqa: B006
    return {
        "message_id": message_id,
        "status": "proposed",
        "agreed": agreed,
        "disagreed": disagreed,
    }


def test_an_agent_is_asked_by_openings_questions_decisions_and_its_name_only() -> None:
    opening = message("m1", "ana", text="review please", kind="review_request")
    assert reason_to_answer(thread(), opening, "rev-1") == "the review's opening"
    question = message("m2", "ana", "question", text="which hash?")
    assert reason_to_answer(thread(), question, "rev-1") == "a question to the thread"
    named = message("m3", "ana", text="@rev-1 can you look?")
    assert reason_to_answer(thread(), named, "rev-1") == "a message naming you"
    assert reason_to_answer(thread(), message("m4", "ana", text="rev-10 is away"), "rev-1") is None
    assert reason_to_answer(thread(), message("m5", "ana", text="thanks all"), "rev-1") is None
    update = message("m6", "ana", "task_progress", text="rev-1 50%")
    assert reason_to_answer(thread(), update, "rev-1") is None


def test_an_agent_never_answers_itself_and_a_decision_only_while_it_awaits_its_stance() -> None:
    own = message("m1", "rev-1", "question", text="rev-1 asks")
    assert reason_to_answer(thread(), own, "rev-1") is None
    decision = message("m2", "ana", "decision", decision="salted hashes")
    waiting = thread([proposed("m2", ["ana"])])
    assert reason_to_answer(waiting, decision, "rev-1") == "a decision awaiting your stance"
    taken = thread([proposed("m2", ["ana"], ["rev-1"])])
    assert reason_to_answer(taken, decision, "rev-1") is None
    agreed = thread([proposed("m2", ["ana", "rev-1"]) | {"status": "agreed"}])
    assert reason_to_answer(agreed, decision, "rev-1") is None


def test_a_message_counts_as_answered_by_a_stance_or_a_reply_naming_it() -> None:
    messages = [
        message("m1", "ana", "decision", decision="x"),
        message("m2", "rev-1", reply_to="m1", text="agree"),
        message("m3", "ana", "question", text="why?"),
        message("m4", "rev-1", text="because", in_reply_to="m3"),
    ]
    assert answered(messages, "rev-1", "m1") and answered(messages, "rev-1", "m3")
    assert not answered(messages, "docs-1", "m1")


def test_an_answer_becomes_a_stance_a_decision_or_a_reply() -> None:
    decision = message("m1", "ana", "decision", decision="salted hashes")
    stance = parse_answer("Disagree: plain hashes leak.", decision, on_decision=True)
    assert stance is not None
    assert (stance.stance, stance.reply_to, stance.content) == (
        "disagree",
        "m1",
        {"text": "plain hashes leak."},
    )
    own = parse_answer("DECISION: use argon2id", message("m2", "ana", "question"), False)
    assert own is not None and own.message_type == "decision"
    assert own.content["decision"] == "use argon2id"
    reply = parse_answer("Agree with the plan", message("m3", "ana"), on_decision=False)
    assert reply is not None and (reply.stance, reply.reply_to) == (None, None)
    assert reply.content == {"text": "Agree with the plan", "in_reply_to": "m3"}
    assert parse_answer("   ", decision, on_decision=True) is None


async def test_a_watch_wakes_its_waiter_on_every_change_and_gives_up_at_its_bound() -> None:
    watch = ThreadWatch()
    seen: list[int] = []

    async def check() -> str | None:
        seen.append(len(seen))
        return "done" if len(seen) == 3 else None

    waiting = asyncio.create_task(watch.until("thread-1", check, within=5))
    while len(seen) < 3:
        await asyncio.sleep(0)
        watch.touch("thread-1")
    assert await waiting == "done"

    async def never() -> str | None:
        return None

    assert await watch.until("thread-1", never, within=0.01) is None


async def test_progress_is_posted_at_once_then_at_most_once_per_interval() -> None:
    now = [100.0]
    posts: list[dict[str, Any]] = []

    async def post(content: dict[str, Any]) -> None:
        posts.append(content)

    reporter = ProgressReporter("task-1", post, 1.0, clock=lambda: now[0])
    for piece in ("a", "b", "c"):
        await reporter.on_delta(piece)
        now[0] += 0.3
    now[0] += 0.2
    await reporter.on_delta("d")

    assert [p["partial_text"] for p in posts] == ["a", "abcd"]
    assert all(p["task_id"] == "task-1" for p in posts)


async def test_progress_streamed_after_a_review_opened_still_names_its_thread() -> None:
    # A task's progress is its last post: text streamed once the interval has passed since
    # the review opened must not erase where the review is (the collaboration test's race).
    now = [100.0]
    posts: list[dict[str, Any]] = []

    async def post(content: dict[str, Any]) -> None:
        posts.append(content)

    reporter = ProgressReporter("task-1", post, 1.0, clock=lambda: now[0])
    await reporter.send({"status": "collaborating", "thread_id": "thread-1"})
    now[0] += 5.0  # the reviewers took their time
    reporter.restart()
    await reporter.on_delta("draft")

    assert [(p["status"], p.get("thread_id")) for p in posts] == [
        ("collaborating", "thread-1"),
        ("working", "thread-1"),
    ]
    assert posts[-1]["partial_text"] == "draft"


async def test_a_hosted_agent_answers_a_message_naming_it_and_not_the_chatter_before(
    hosted_node: Node, model_server: ScriptedModelServer
) -> None:
    model_server.responder = lambda body: Step(content="I would hash them with argon2id.")
    log = LogWatcher(hosted_node)
    server, _ = build_server(hosted_node)
    async with Client(server, mode="legacy") as ana:
        await ana.call_tool("bzzz_announce", {"agent_id": "ana", "role": "developer"})
        created = await ana.call_tool(
            "bzzz_thread", {"action": "create", "participants": ["rev-1"], "topic": "tokens"}
        )
        assert created.structured_content is not None
        thread_id = created.structured_content["thread_id"]
        ids = []
        for text in ("morning all", "rev-1, how should we store tokens?"):
            posted = await ana.call_tool(
                "bzzz_post",
                {
                    "target_address": "bzzz://*",
                    "thread_id": thread_id,
                    "message_type": "text",
                    "content": {"text": text},
                },
            )
            assert posted.structured_content is not None
            ids.append(posted.structured_content["message_id"])
        async with asyncio.timeout(10):
            answer = await log.first(
                lambda e: e.type == "message.posted" and e.payload["sender"] == "rev-1"
            )

    assert answer.payload["content"]["in_reply_to"] == ids[1]
    assert [m["sender"] for m in log.thread_messages(thread_id)].count("rev-1") == 1
    [prompt] = model_server.requests
    users = [m["content"] for m in prompt["messages"] if m["role"] == "user"]
    assert users[0] == "[ana]: morning all"
    assert "rev-1, how should we store tokens?" in users[-1]


@pytest.fixture
async def broke_node(llm_settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A node whose daily limit cannot pay for one model call."""
    llm_settings.cost.daily_limit = 0.000001
    async with Node(llm_settings, bus=memory_bus) as running:
        yield running


async def test_a_thread_reply_is_a_model_call_under_the_cost_limits(
    broke_node: Node, model_server: ScriptedModelServer
) -> None:
    log = LogWatcher(broke_node)
    server, _ = build_server(broke_node)
    async with Client(server, mode="legacy") as ana:
        await ana.call_tool("bzzz_announce", {"agent_id": "ana", "role": "developer"})
        created = await ana.call_tool(
            "bzzz_thread", {"action": "create", "participants": ["rev-1"], "topic": "tokens"}
        )
        assert created.structured_content is not None
        thread_id = created.structured_content["thread_id"]
        asked = await ana.call_tool(
            "bzzz_post",
            {
                "target_address": "bzzz://*",
                "thread_id": thread_id,
                "message_type": "question",
                "content": {"text": "how should we store tokens?"},
            },
        )
        assert not asked.is_error
        async with asyncio.timeout(10):
            refused = await log.first(lambda e: e.type == "cost.refused")

    assert refused.payload["agent_id"] == "rev-1"
    assert model_server.requests == []
    assert [m["sender"] for m in log.thread_messages(thread_id)] == ["ana"]
