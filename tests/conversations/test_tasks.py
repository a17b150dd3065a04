"""Tasks: assigned with task_assignment, moved on by the assignee's task_* messages."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.errors import InvalidParameters
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput


async def announce(node: Node, agent_id: str, role: str, **fields: Any) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role, **fields)
    )


async def post(node: Node, sender: str, target: str, kind: str, **content: Any) -> dict[str, Any]:
    return await node.conversations.post(
        Caller(f"session-{sender}"),
        PostInput(target_address=target, message_type=kind, content=content),
    )


async def assign(node: Node, target: str, **content: Any) -> dict[str, Any]:
    content.setdefault("description", "review the API")
    return await post(node, "boss", target, "task_assignment", **content)


async def agent(node: Node, agent_id: str) -> dict[str, Any]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://{agent_id}"))
    content: dict[str, Any] = got["content"]
    return content


async def tasks(node: Node, agent_id: str) -> dict[str, dict[str, Any]]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://{agent_id}/tasks"))
    return {t["id"]: t for t in got["content"]["tasks"]}


@pytest.fixture
async def team(node: Node) -> Node:
    await announce(node, "boss", "architect")
    await announce(node, "dev", "developer", max_tasks=2)
    await announce(node, "rev", "reviewer")
    return node


async def test_a_task_assignment_creates_a_pending_task(team: Node) -> None:
    result = await assign(
        team, "bzzz://dev", task_type="code_review", task_data={"language": "python"}
    )

    task_id = result["tasks"]["dev"]
    [task] = (await agent(team, "dev"))["current_tasks"]
    assert task["id"] == task_id
    assert (task["type"], task["status"], task["assigner"]) == ("code_review", "pending", "boss")
    assert task["description"] == "review the API"
    assert task["data"] == {"language": "python"}
    assert task["startTime"].endswith("Z")
    assert task["endTime"] is None
    info = (await agent(team, "dev"))["agent_info"]
    assert (info["status"], info["active_tasks"]) == ("busy", 1)


async def test_a_wildcard_assignment_gives_each_recipient_its_own_task(team: Node) -> None:
    result = await assign(team, "bzzz://*")

    assert sorted(result["tasks"]) == ["dev", "rev"]
    assert result["tasks"]["dev"] != result["tasks"]["rev"]
    assert list(await tasks(team, "rev")) == [result["tasks"]["rev"]]


async def test_an_agent_at_max_tasks_is_refused_with_the_reason(team: Node) -> None:
    await assign(team, "bzzz://dev")
    await assign(team, "bzzz://dev")

    result = await assign(team, "bzzz://dev")

    delivery = result["delivery_results"]
    assert delivery["delivered"] is False
    assert delivery["recipients"] == []
    assert delivery["undelivered"] == [{"agent_id": "dev", "reason": "agent is at max_tasks (2)"}]
    assert len(await tasks(team, "dev")) == 2


async def test_a_wildcard_assignment_skips_full_agents_and_reaches_the_rest(team: Node) -> None:
    await assign(team, "bzzz://dev")
    await assign(team, "bzzz://dev")

    result = await assign(team, "bzzz://*")

    assert result["delivery_results"]["recipients"] == ["rev"]
    assert result["delivery_results"]["undelivered"] == [
        {"agent_id": "dev", "reason": "agent is at max_tasks (2)"}
    ]


async def test_an_assignment_to_an_offline_agent_is_not_delivered(team: Node) -> None:
    await team.agents.session_ended(Caller("session-dev"))

    result = await assign(team, "bzzz://dev")

    assert result["delivery_results"]["undelivered"] == [
        {"agent_id": "dev", "reason": "agent is offline"}
    ]
    assert await tasks(team, "dev") == {}


async def test_task_progress_moves_the_task_in_progress(team: Node) -> None:
    task_id = (await assign(team, "bzzz://dev"))["tasks"]["dev"]

    result = await post(team, "dev", "bzzz://boss", "task_progress", task_id=task_id, percent=40)

    assert result["task_update"]["task_status"] == "in_progress"
    task = (await tasks(team, "dev"))[task_id]
    assert task["status"] == "in_progress"
    assert task["progress"]["percent"] == 40
    assert [m["message_type"] for m in (await inbox(team, "boss"))] == ["task_progress"]


async def test_task_complete_records_the_result_and_raises_performance(team: Node) -> None:
    task_id = (await assign(team, "bzzz://dev"))["tasks"]["dev"]
    before = (await agent(team, "dev"))["agent_info"]["performance"]

    await post(team, "dev", "bzzz://boss", "task_complete", task_id=task_id, result="LGTM")

    task = (await tasks(team, "dev"))[task_id]
    assert (task["status"], task["result"]) == ("completed", "LGTM")
    assert task["endTime"] is not None
    info = (await agent(team, "dev"))["agent_info"]
    assert info["performance"] > before
    assert (info["status"], info["active_tasks"]) == ("idle", 0)


async def test_task_failed_records_the_error_and_lowers_performance(team: Node) -> None:
    task_id = (await assign(team, "bzzz://dev"))["tasks"]["dev"]
    before = (await agent(team, "dev"))["agent_info"]["performance"]

    await post(team, "dev", "bzzz://boss", "task_failed", task_id=task_id, error="no access")

    task = (await tasks(team, "dev"))[task_id]
    assert (task["status"], task["error"]) == ("failed", "no access")
    info = (await agent(team, "dev"))["agent_info"]
    assert info["performance"] < before
    assert info["active_tasks"] == 0


async def test_a_finished_task_frees_room_under_max_tasks(team: Node) -> None:
    first = (await assign(team, "bzzz://dev"))["tasks"]["dev"]
    await assign(team, "bzzz://dev")
    await post(team, "dev", "bzzz://boss", "task_complete", task_id=first)

    result = await assign(team, "bzzz://dev")

    assert result["delivery_results"]["recipients"] == ["dev"]


async def test_the_task_id_may_be_left_out_when_only_one_task_fits(team: Node) -> None:
    task_id = (await assign(team, "bzzz://dev"))["tasks"]["dev"]

    result = await post(team, "dev", "bzzz://boss", "task_complete", result="done")

    assert result["task_update"]["task_id"] == task_id
    assert (await tasks(team, "dev"))[task_id]["status"] == "completed"


async def test_an_update_without_a_task_to_update_names_content_task_id(team: Node) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await post(team, "dev", "bzzz://boss", "task_complete", result="done")

    assert "content.task_id" in caught.value.message


@pytest.mark.parametrize("who", ["boss", "rev"])
async def test_only_the_assignee_may_update_a_task(team: Node, who: str) -> None:
    task_id = (await assign(team, "bzzz://dev"))["tasks"]["dev"]

    with pytest.raises(InvalidParameters) as caught:
        await post(team, who, "bzzz://dev", "task_complete", task_id=task_id)

    assert "assigned to 'dev'" in caught.value.message
    assert (await tasks(team, "dev"))[task_id]["status"] == "pending"
    assert (await agent(team, "dev"))["agent_info"]["active_tasks"] == 1


async def test_a_finished_task_cannot_be_updated_again(team: Node) -> None:
    task_id = (await assign(team, "bzzz://dev"))["tasks"]["dev"]
    await post(team, "dev", "bzzz://boss", "task_complete", task_id=task_id)
    performance = (await agent(team, "dev"))["agent_info"]["performance"]

    with pytest.raises(InvalidParameters) as caught:
        await post(team, "dev", "bzzz://boss", "task_failed", task_id=task_id)

    assert "already completed" in caught.value.message
    assert (await agent(team, "dev"))["agent_info"]["performance"] == performance


async def test_an_unknown_task_id_is_invalid_parameters(team: Node) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await post(team, "dev", "bzzz://boss", "task_progress", task_id="task-nope")

    assert "task-nope" in caught.value.message


async def inbox(node: Node, agent_id: str) -> list[dict[str, Any]]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://{agent_id}/inbox"))
    messages: list[dict[str, Any]] = got["content"]["messages"]
    return messages
