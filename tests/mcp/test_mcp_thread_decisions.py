"""bzzz_thread's pause/resume/resolve/close/review and bzzz_post's stance, through an MCP client."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_checks import ClientFactory, announce, assert_error_response, call_ok

ACTIONS = ["pause", "resume", "resolve", "close"]


async def test_the_tool_describes_the_new_actions(connect: ClientFactory) -> None:
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}

    thread = tools["bzzz_thread"]
    for action in (*ACTIONS, "review"):
        assert f"- {action}" in (thread.description or "") or action in (thread.description or "")
    assert {"reason", "roles", "task_id", "criteria"} <= set(thread.input_schema["properties"])
    assert "stance" in tools["bzzz_post"].input_schema["properties"]


async def test_pause_resume_resolve_and_close_over_mcp(connect: ClientFactory) -> None:
    async with connect() as arch, connect() as dev:
        await announce(arch, "arch-1")
        await announce(dev, "dev-1", role="developer")
        created = await call_ok(
            arch, "bzzz_thread", {"action": "create", "topic": "Queues", "participants": ["dev-1"]}
        )
        thread_id = created["thread_id"]
        paused = await call_ok(dev, "bzzz_thread", {"action": "pause", "thread_id": thread_id})
        resumed = await call_ok(arch, "bzzz_thread", {"action": "resume", "thread_id": thread_id})
        unresolvable = await arch.call_tool(
            "bzzz_thread", {"action": "resolve", "thread_id": thread_id, "reason": "done"}
        )
        closed = await call_ok(
            arch, "bzzz_thread", {"action": "close", "thread_id": thread_id, "reason": "moot"}
        )

    assert paused["result"]["status"] == "paused"
    assert resumed["result"]["status"] == "active"
    assert_error_response(unresolvable, "INVALID_PARAMETERS")
    assert closed["result"]["status"] == "completed"


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({}, "INVALID_PARAMETERS"),
        ({"thread_id": "thread-does-not-exist"}, "THREAD_NOT_FOUND"),
        ({"thread_id": "../../etc"}, "INVALID_PARAMETERS"),
        ({"thread_id": "x" * 5000}, "INVALID_PARAMETERS"),
        ({"thread_id": "thread-x", "reason": "r" * 5000}, "INVALID_PARAMETERS"),
        ({"thread_id": 42}, "INVALID_PARAMETERS"),
    ],
)
async def test_status_actions_with_bad_input_answer_the_reference_error(
    connect: ClientFactory, action: str, arguments: dict[str, Any], code: str
) -> None:
    async with connect() as client:
        await announce(client, "arch-1")
        result = await client.call_tool("bzzz_thread", {"action": action, **arguments})

    assert_error_response(result, code)


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"topic": "Schema"}, "INVALID_PARAMETERS"),
        ({"roles": ["reviewer"]}, "INVALID_PARAMETERS"),
        ({"roles": [], "topic": "Schema"}, "INVALID_PARAMETERS"),
        ({"roles": ["reviewer"] * 11, "topic": "Schema"}, "INVALID_PARAMETERS"),
        ({"roles": ["re viewer"], "topic": "Schema"}, "INVALID_PARAMETERS"),
        ({"roles": ["reviewer"], "task_id": "task-none"}, "INVALID_PARAMETERS"),
        ({"roles": ["nobody-has-this-role"], "topic": "Schema"}, "AGENT_NOT_FOUND"),
        ({"roles": ["reviewer"], "topic": "Schema", "criteria": []}, "INVALID_PARAMETERS"),
    ],
)
async def test_review_with_bad_input_answers_the_reference_error(
    connect: ClientFactory, arguments: dict[str, Any], code: str
) -> None:
    async with connect() as client:
        await announce(client, "arch-1")
        result = await client.call_tool("bzzz_thread", {"action": "review", **arguments})

    assert_error_response(result, code)


async def test_a_review_and_a_consensus_over_mcp(connect: ClientFactory) -> None:
    async with connect() as lead, connect() as rev:
        await announce(lead, "lead-1", role="manager")
        await announce(rev, "rev-1", role="reviewer")
        review = await call_ok(
            lead, "bzzz_thread", {"action": "review", "topic": "Schema v2", "roles": ["reviewer"]}
        )
        thread_id = review["thread_id"]
        decision = await call_ok(
            lead,
            "bzzz_post",
            {
                "target_address": "bzzz://*",
                "message_type": "decision",
                "content": {"text": "Ship schema v2."},
                "thread_id": thread_id,
            },
        )
        bad_stance = await rev.call_tool(
            "bzzz_post",
            {
                "target_address": "bzzz://*",
                "message_type": "text",
                "content": {"text": "Sure"},
                "thread_id": thread_id,
                "stance": "maybe",
                "reply_to": decision["message_id"],
            },
        )
        agreed = await call_ok(
            rev,
            "bzzz_post",
            {
                "target_address": "bzzz://*",
                "message_type": "text",
                "content": {"text": "Agreed."},
                "thread_id": thread_id,
                "stance": "agree",
                "reply_to": decision["message_id"],
            },
        )
        got = await call_ok(lead, "bzzz_get", {"address": f"bzzz://lead-1/threads/{thread_id}"})

    assert review["result"]["participants"] == ["lead-1", "rev-1"]
    assert_error_response(bad_stance, "INVALID_PARAMETERS")
    assert agreed["consensus"]["decisions"] == ["Ship schema v2."]
    view = got["content"]["thread"]
    assert view["status"] == "completed"
    assert view["shared_context"]["review_criteria"]
    assert view["decision_log"][0]["status"] == "agreed"
