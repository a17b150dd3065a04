"""Collaborative review: one call opens a review thread with the best available agents per role."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from bzzz.clock import ManualClock
from bzzz.errors import AgentNotFound, InvalidParameters
from bzzz.eventlog import Caller
from bzzz.schemas import PostInput

from .conftest import NodeFactory, announce, thread, thread_view


async def test_a_review_with_two_roles_invites_the_two_best_available_agents_of_each(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node() as node:
        await announce(node, "lead", "manager")
        await announce(node, "dev", "developer")
        for agent_id in ("sec-1", "sec-2", "sec-3"):
            await announce(node, agent_id, "security", capabilities=["code_review"])
        await announce(node, "sec-0", "security")  # no capability match: ranked last
        await announce(node, "rev-1", "reviewer", capabilities=["code_review"])
        await announce(node, "rev-busy", "reviewer", capabilities=["code_review"], max_tasks=1)
        await node.conversations.post(
            Caller("session-lead"),
            PostInput(
                target_address="bzzz://rev-busy",
                message_type="task_assignment",
                content={"task_type": "other", "description": "busy"},
            ),
        )
        task = await node.conversations.post(
            Caller("session-lead"),
            PostInput(
                target_address="bzzz://dev",
                message_type="task_assignment",
                content={"task_type": "code_review", "description": "Payment API"},
                priority="high",
            ),
        )
        review = await thread(
            node,
            "lead",
            "review",
            task_id=task["tasks"]["dev"],
            roles=["security", "reviewer"],
        )
        view = await thread_view(node, review["thread_id"])

    result = review["result"]
    assert result["topic"] == "Collaborative Review: Payment API"
    assert result["metadata"]["reviewers"] == {
        "security": ["sec-1", "sec-2"],
        "reviewer": ["rev-1"],
    }
    assert sorted(result["participants"]) == ["lead", "rev-1", "sec-1", "sec-2"]
    context = view["shared_context"]
    assert context["task_details"]["task_id"] == task["tasks"]["dev"]
    assert context["review_criteria"][:2] == ["correctness", "security"]
    deadline = datetime.fromisoformat(context["deadline"].replace("Z", "+00:00"))
    assert deadline == clock.now() + timedelta(hours=24)  # a high-priority task
    [opening] = view["messages"]
    assert opening["sender"] == "lead"
    assert "Payment API" in opening["content"]
    assert opening["metadata"]["kind"] == "review_request"


async def test_a_role_with_nobody_available_fails_before_anything_is_created(
    make_node: NodeFactory,
) -> None:
    async with make_node() as node:
        await announce(node, "lead", "manager")
        await announce(node, "rev-1", "reviewer")
        with pytest.raises(AgentNotFound) as caught:
            await thread(node, "lead", "review", topic="Schema", roles=["reviewer", "security"])
        listed = await thread(node, "lead", "list")

    assert "no available agent with role 'security'" in caught.value.message
    assert caught.value.details["roles_without_agents"] == ["security"]
    assert listed["result"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"topic": "Schema"}, "roles"),
        ({"roles": ["reviewer"]}, "task_id"),
        ({"roles": ["reviewer"], "task_id": "task-nope"}, "task_id"),
    ],
)
async def test_a_review_without_roles_or_subject_is_invalid(
    make_node: NodeFactory, params: dict[str, object], field: str
) -> None:
    async with make_node() as node:
        await announce(node, "lead", "manager")
        await announce(node, "rev-1", "reviewer")
        with pytest.raises(InvalidParameters) as caught:
            await thread(node, "lead", "review", **params)

    assert field in caught.value.message
