"""An agent's read marks: unread messages, marked read through the log, kept on announcing."""

from __future__ import annotations

import pytest

from bzzz.errors import ErrorCode, PermissionDenied
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.principal import Principal, Scope
from bzzz.schemas import AnnounceInput, PostInput

DEV = Caller("session-dev")


async def _announce(node: Node, agent_id: str) -> None:
    params = AnnounceInput(agent_id=agent_id, role="developer", project="proj")
    await node.agents.announce(Caller(f"session-{agent_id}"), params)


async def _post(node: Node, text: str) -> str:
    params = PostInput(target_address="bzzz://dev", message_type="text", content={"text": text})
    posted = await node.conversations.post(Caller("session-arch"), params)
    return str(posted["message_id"])


@pytest.fixture
async def team(node: Node) -> Node:
    await _announce(node, "arch")
    await _announce(node, "dev")
    return node


async def test_messages_marked_read_leave_the_unread_ones_newest_first(team: Node) -> None:
    first, second, third = [await _post(team, f"note {n}") for n in range(3)]

    before = await team.inbox.read(DEV, "dev", unread=True, limit=10)
    marked = await team.inbox.mark_read(DEV, "dev", [third, second])
    after = await team.inbox.read(DEV, "dev", unread=True, limit=10)
    everything = await team.inbox.read(DEV, "dev", unread=False, limit=10)

    assert [m["id"] for m in before["messages"]] == [third, second, first]
    assert before["unread"] == 3
    assert sorted(marked["marked"]) == sorted([third, second])
    assert [m["id"] for m in after["messages"]] == [first]
    assert after["unread"] == 1
    assert [(m["id"], m["read"]) for m in everything["messages"]] == [
        (third, True),
        (second, True),
        (first, False),
    ]


async def test_a_mark_moves_past_the_messages_read_in_a_row_and_survives_announcing(
    team: Node,
) -> None:
    first, second = await _post(team, "one"), await _post(team, "two")
    await team.inbox.mark_read(DEV, "dev", [second])
    await team.inbox.mark_read(DEV, "dev", [first])

    await _announce(team, "dev")  # the agent comes back: its marks stay
    later = await _post(team, "three")
    shown = await team.inbox.read(DEV, "dev", unread=True, limit=10)

    agent = team.agents.directory.get("dev")
    assert agent is not None
    assert agent.metadata["inbox_read"]["ids"] == []  # folded into "until"
    assert [m["id"] for m in shown["messages"]] == [later]


async def test_another_caller_neither_reads_nor_marks_an_agents_inbox(team: Node) -> None:
    message = await _post(team, "private")
    teammate = Principal("token:t", "token", frozenset({"proj"}), frozenset({"*"}), Scope.WRITE)
    stranger = Caller("session-teammate", teammate)

    with pytest.raises(PermissionDenied) as reading:
        await team.inbox.read(stranger, "dev")
    with pytest.raises(PermissionDenied) as marking:
        await team.inbox.mark_read(stranger, "dev", [message])

    assert reading.value.code == marking.value.code == ErrorCode.PERMISSION_DENIED
    shown = await team.inbox.read(DEV, "dev", unread=True)
    assert [m["id"] for m in shown["messages"]] == [message]


async def test_a_read_mark_on_another_projects_subject_is_refused(team: Node) -> None:
    """A node serving another project cannot mark an agent's messages read (hiding them
    from its next turn): the mark must travel on the agent's project's subject."""
    message = await _post(team, "read me")
    payload = {"agent_id": "dev", "message_ids": [message]}

    outcome = await team.log.emit("agent.inbox_read", "agent", "dev", payload, project="other")
    after = await team.inbox.read(DEV, "dev", unread=True, limit=10)

    assert outcome.get("ok") is False
    assert [m["id"] for m in after["messages"]] == [message]


async def test_a_mark_naming_an_overlong_id_is_refused_before_the_log(team: Node) -> None:
    """A bad id is INVALID_PARAMETERS from the service, not an envelope the projector then
    fails on (a NETWORK_ERROR, a failed batch, junk on the log)."""
    with pytest.raises(Exception) as refused:
        await team.inbox.mark_read(DEV, "dev", ["m" * 5000])

    assert getattr(refused.value, "code", None) == ErrorCode.INVALID_PARAMETERS
    assert getattr(refused.value, "details", {}).get("field") == "message_ids"
