"""bzzz_get pages an inbox, tasks, activity and a thread with before / after cursors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bzzz.errors import InvalidParameters
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

ENTRIES = 23
PAGE = 5


async def _announce(node: Node, agent_id: str, **fields: Any) -> None:
    await node.agents.announce(
        Caller(f"s-{agent_id}"), AnnounceInput(agent_id=agent_id, role="dev", **fields)
    )


async def _post(node: Node, sender: str, **fields: Any) -> dict[str, Any]:
    return await node.conversations.post(Caller(f"s-{sender}"), PostInput(**fields))


async def _read(node: Node, address: str, key: str, **cursor: str) -> tuple[list[str], Any]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=address, max_history=PAGE, **cursor))
    content = got["content"]
    entries = content["thread"]["messages"] if key == "thread" else content[key]
    return [e["id"] for e in entries], content["page"]


Filler = Callable[[Node], Awaitable[tuple[str, str, list[str]]]]


async def _inbox(node: Node) -> tuple[str, str, list[str]]:
    ids = []
    for n in range(ENTRIES):
        posted = await _post(
            node, "boss", target_address="bzzz://dev", message_type="note", content={"n": n}
        )
        ids.append(posted["message_id"])
    return "bzzz://dev/inbox", "messages", ids[::-1]


async def _tasks(node: Node) -> tuple[str, str, list[str]]:
    ids = []
    for n in range(ENTRIES):
        posted = await _post(
            node,
            "boss",
            target_address="bzzz://dev",
            message_type="task_assignment",
            content={"task_type": "t", "description": f"task {n}"},
        )
        ids.append(posted["tasks"]["dev"])
    return "bzzz://dev/tasks", "tasks", ids[::-1]


async def _activity(node: Node) -> tuple[str, str, list[str]]:
    for _ in range(ENTRIES - 1):
        await _post(node, "boss", target_address="bzzz://dev", message_type="note", content={})
    everything = await node.agents.get(
        LOCAL_CALLER, GetInput(address="bzzz://dev", max_history=1000)
    )
    ids = [a["id"] for a in everything["content"]["recent_activity"]]
    assert len(ids) == ENTRIES  # the announcement, then each message received
    return "bzzz://dev", "recent_activity", ids


async def _thread(node: Node) -> tuple[str, str, list[str]]:
    created = await node.conversations.thread(
        Caller("s-boss"), ThreadInput(action="create", topic="t", participants=["dev"])
    )
    ids = []
    for n in range(ENTRIES):
        posted = await _post(
            node,
            "boss",
            thread_id=created["thread_id"],
            message_type="text",
            content={"text": f"m{n}"},
        )
        ids.append(posted["message_id"])
    # The view reads oldest first; the page's newest id is the last message shown.
    return f"bzzz://*/threads/{created['thread_id']}", "thread", ids[::-1]


@pytest.mark.parametrize("fill", [_inbox, _tasks, _activity, _thread])
async def test_a_list_is_read_to_its_end_page_by_page_both_ways(
    store_node: Node, fill: Filler
) -> None:
    """On SQLite and PostgreSQL: every entry exactly once, has_more until the end."""
    await _announce(store_node, "boss")
    await _announce(store_node, "dev", max_tasks=100)
    address, key, newest_first = await fill(store_node)

    seen: list[str] = []
    ids, page = await _read(store_node, address, key)
    while True:
        shown = ids if key != "thread" else ids[::-1]
        seen += shown
        assert page["oldest"] == (shown[-1] if shown else None)
        if not page["has_more"]:
            break
        ids, page = await _read(store_node, address, key, before=page["oldest"])
    assert seen == newest_first

    # Forward from the oldest entry: what came since, in pages, to the newest.
    forward: list[str] = []
    cursor = newest_first[-1]
    while True:
        ids, page = await _read(store_node, address, key, after=cursor)
        shown = ids if key != "thread" else ids[::-1]
        forward = shown + forward
        if not page["has_more"]:
            break
        cursor = page["newest"]
    assert forward == newest_first[:-1]


async def test_a_cursor_that_names_no_entry_or_both_cursors_are_refused(node: Node) -> None:
    await _announce(node, "dev")
    with pytest.raises(InvalidParameters, match="not an entry"):
        await node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/inbox", before="msg-nope"))
    with pytest.raises(InvalidParameters, match="not both"):
        await node.agents.get(
            LOCAL_CALLER, GetInput(address="bzzz://dev/inbox", before="a", after="b")
        )
    with pytest.raises(InvalidParameters, match="cannot be paged"):
        await node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/threads", before="a"))
