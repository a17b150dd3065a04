"""Hosted agents and a project's facts: agreed facts reach their prompts with their sources; a
closed thread is looked back on (an episode kept, facts proposed until someone agrees)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from bzzz.config import Settings
from bzzz.eventlog import Caller
from bzzz.llm.facts import RESPONSE_FORMAT, fact_line, facts_message, parse_retrospective
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.store.llm_repository import LLMRepository

from .conftest import use_model
from .support import LogWatcher, TaskWatcher

RETRIES = "Checkout retries carry idempotency keys; refunds do not."
SOURCE = {"thread": "th-decided-1", "message": "msg-decided-1", "agents": ["ana", "bob"]}
SHOP_ROLES: list[dict[str, Any]] = [
    {"role": "architect", "agent_id": "arch-1", "project": "shop"},
    {"role": "reviewer", "agent_id": "rev-1", "project": "shop"},
]


@pytest.fixture
async def shop_node(
    settings: Settings, model_server: ScriptedModelServer, memory_bus: InMemoryBus
) -> AsyncIterator[Node]:
    """A node hosting an architect and a reviewer of the project shop."""
    use_model(settings, model_server)
    settings.agents.default_roles = [dict(role) for role in SHOP_ROLES]
    async with Node(settings, bus=memory_bus) as running:
        yield running


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


async def state(node: Node, project: str, *triple: str, **extra: Any) -> dict[str, Any]:
    subject, relation, obj = triple
    fact: dict[str, Any] = await node.knowledge.state(
        Caller("facts-test", LOCAL), project, subject, relation, obj, **extra
    )
    return fact


def test_a_fact_line_says_what_and_where_from() -> None:
    fact = {
        "id": "f-1",
        "subject": "checkout retries",
        "relation": "carry",
        "object": "idempotency keys",
        "statement": RETRIES,
        "source": SOURCE,
        "valid_from": "2026-12-01T10:00:00Z",
    }
    line = fact_line(fact)
    assert line.startswith(f"- {RETRIES} (checkout retries carry idempotency keys)")
    assert "thread th-decided-1" in line and "message msg-decided-1" in line
    assert "agreed by ana, bob" in line and "since 2026-12-01" in line and "fact f-1" in line
    # The bound keeps whole lines only.
    message = facts_message([fact] * 10, max_chars=len(line) * 2 + 5)
    assert message is not None and message["content"].count("\n- ") == 2
    assert facts_message([]) is None


def test_a_retrospective_is_read_from_json_fenced_json_or_prose() -> None:
    answer = {
        "summary": "They chose keys.",
        "outcome": "agreed",
        "lessons": ["ask the payments team first"],
        "facts": [
            {
                "subject": "refunds",
                "relation": "carry",
                "object": "no idempotency keys",
                "statement": "Refunds carry no idempotency keys.",
                "confidence": 7,
            },
            {"subject": "", "relation": "x", "object": "y"},
        ],
    }
    for text in (json.dumps(answer), f"```json\n{json.dumps(answer)}\n```", f"Sure: {answer}"):
        retro = parse_retrospective(text.replace("'", '"'), "closed")
        assert retro.summary == "They chose keys." and retro.lessons == [answer["lessons"][0]]
        [fact] = retro.facts
        assert (fact.subject, fact.object, fact.confidence) == (
            "refunds",
            "no idempotency keys",
            1.0,
        )
    prose = parse_retrospective("We talked; nothing was settled.", "closed")
    assert (prose.summary, prose.outcome, prose.facts) == (
        "We talked; nothing was settled.",
        "closed",
        [],
    )


async def run_task(boss: Client, watcher: TaskWatcher, agent_id: str, text: str) -> str:
    data = {"messages": [{"role": "user", "content": text}], "project": "shop"}
    posted = await boss.call_tool(
        "bzzz_post",
        {
            "target_address": f"bzzz://{agent_id}",
            "message_type": "task_assignment",
            "content": {"task_type": "chat_completion", "description": text, "task_data": data},
        },
    )
    assert posted.structured_content is not None, posted.content
    task_id: str = posted.structured_content["tasks"][agent_id]
    async with asyncio.timeout(30):  # a bound, not a speed target
        return await watcher.finished(task_id)


async def test_a_task_prompt_carries_the_projects_relevant_fact_and_its_source(
    shop_node: Node, model_server: ScriptedModelServer
) -> None:
    await state(
        shop_node,
        "shop",
        "checkout retries",
        "carry",
        "idempotency keys",
        statement=RETRIES,
        source=SOURCE,
    )
    await state(shop_node, "shop", "catalogue images", "are served from", "the CDN")
    await state(shop_node, "garden", "checkout retries", "carry", "GARDEN-ONLY-TOKEN")
    watcher = TaskWatcher(shop_node)
    server, _ = build_server(shop_node)
    async with Client(server, mode="legacy") as boss:
        await boss.call_tool(
            "bzzz_announce", {"agent_id": "boss", "role": "lead", "project": "shop"}
        )
        done = await run_task(boss, watcher, "arch-1", "How should checkout retries be made safe?")

    assert done == "completed"
    [request] = model_server.requests
    text = prompt_text(request)
    assert RETRIES in text
    assert "thread th-decided-1" in text and "ana, bob" in text
    assert "GARDEN-ONLY-TOKEN" not in text  # another project's fact never
    assert "Facts this project agreed" in text


async def test_a_thread_reply_prompt_carries_the_fact_and_a_proposed_one_does_not(
    shop_node: Node, model_server: ScriptedModelServer
) -> None:
    await state(
        shop_node, "shop", "checkout retries", "carry", "idempotency keys", statement=RETRIES,
        source=SOURCE,
    )  # fmt: skip
    await state(
        shop_node, "shop", "checkout retries", "are logged in", "PROPOSED-ONLY-TOKEN",
        status="proposed",
    )  # fmt: skip
    model_server.responder = lambda body: Step(content="Keys on every retry.")
    log = LogWatcher(shop_node)
    server, _ = build_server(shop_node)
    async with Client(server, mode="legacy") as ana:
        await ana.call_tool(
            "bzzz_announce", {"agent_id": "ana", "role": "developer", "project": "shop"}
        )
        created = await ana.call_tool(
            "bzzz_thread",
            {"action": "create", "participants": ["rev-1"], "topic": "checkout retries"},
        )
        assert created.structured_content is not None, created.content
        thread_id = created.structured_content["thread_id"]
        await ana.call_tool(
            "bzzz_post",
            {
                "thread_id": thread_id,
                "message_type": "question",
                "content": {"text": "How do checkout retries stay safe?"},
            },
        )
        async with asyncio.timeout(60):  # a bound, not a speed target (a loaded machine)
            await log.first(lambda e: e.type == "message.posted" and e.payload["sender"] == "rev-1")

    [request] = model_server.requests
    text = prompt_text(request)
    assert RETRIES in text and "thread th-decided-1" in text
    assert "PROPOSED-ONLY-TOKEN" not in text


def _looks_back(body: dict[str, Any]) -> bool:
    return "Look back on it" in prompt_text(body)


def _retrospective(body: dict[str, Any]) -> Step:
    if not _looks_back(body):
        return Step(content="AGREE: keys make retries safe.")
    return Step(
        content=json.dumps(
            {
                "summary": "Ana proposed idempotency keys on retries; rev-1 agreed.",
                "outcome": "agreed",
                "lessons": ["Settle retry semantics before the payment adapter is written."],
                "facts": [
                    {
                        "subject": "payment adapter",
                        "relation": "retries with",
                        "object": "idempotency keys",
                        "statement": "The payment adapter retries with idempotency keys.",
                        "confidence": 0.9,
                    }
                ],
            }
        )
    )


@pytest.mark.parametrize("structured", [True, False], ids=["json-schema", "no-json-schema"])
async def test_a_closed_thread_gives_an_episode_and_a_proposed_fact_until_a_participant_agrees(
    shop_node: Node, model_server: ScriptedModelServer, structured: bool
) -> None:
    model_server.structured_output = structured
    model_server.responder = _retrospective
    log = LogWatcher(shop_node)
    server, _ = build_server(shop_node)
    async with Client(server, mode="legacy") as ana:
        await ana.call_tool(
            "bzzz_announce", {"agent_id": "ana", "role": "developer", "project": "shop"}
        )
        created = await ana.call_tool(
            "bzzz_thread",
            {"action": "create", "participants": ["rev-1"], "topic": "payment retries"},
        )
        assert created.structured_content is not None, created.content
        thread_id = created.structured_content["thread_id"]
        await ana.call_tool(
            "bzzz_post",
            {
                "thread_id": thread_id,
                "message_type": "decision",
                "content": {"decision": "Retries carry idempotency keys."},
            },
        )
        # A bound, not a speed target: two model calls (three without the schema) on a
        # loaded machine. The episode is kept before the facts are proposed.
        async with asyncio.timeout(60):
            await log.first(lambda e: e.type == "fact.stated" and e.payload["origin"] == "summary")

        found = await shop_node.knowledge.search(LOCAL, "shop", about="payment adapter")
        [fact] = [f for f in found["facts"] if f["relation"] == "retries with"]
        assert fact["status"] == "proposed"
        assert fact["source"]["thread"] == thread_id
        # The agents' prompts read agreed facts only: not this one yet.
        before = await shop_node.knowledge.for_prompt("shop", "payment adapter retries")
        assert fact["id"] not in [f["id"] for f in before]

        # A participant of the source thread agrees: the fact is agreed.
        ana_caller = Caller("facts-ana", LOCAL)
        agreed = await shop_node.knowledge.agree(ana_caller, fact["id"], agent="ana")
        assert agreed["status"] == "agreed"

    retro = [r for r in model_server.requests if _looks_back(r)]
    assert len(retro) == (1 if structured else 2)
    assert retro[0]["response_format"] == RESPONSE_FORMAT
    if not structured:
        assert "response_format" not in retro[1]
    async with shop_node.db.session() as session:
        [episode] = await LLMRepository(session).memories("rev-1", "shop", 5)
    assert episode.thread_id == thread_id and episode.outcome == "agreed"
    assert "Lesson: Settle retry semantics" in episode.summary
    assert set(episode.participants) == {"ana", "rev-1"}
    prompt_facts = await shop_node.knowledge.for_prompt("shop", "payment adapter retries")
    assert fact["id"] in [f["id"] for f in prompt_facts]
