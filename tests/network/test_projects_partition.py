"""Projects are the log's partition: a node consumes and stores only the projects it serves.

Three in-process nodes on one real nats-server: ``*``, ``p1`` and ``p2``. Agents, posts, tasks
and threads are made in p1 and p2; the p1 node's store (SQLite and PostgreSQL) holds none of
p2's, the ``*`` node holds both, a write about p2 on the p1 node is NotServed and stores
nothing, and the server's consumer info shows the p1 node's filter subjects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from admitted import admit
from sqlalchemy import select

from bzzz.config import Settings, load_settings
from bzzz.errors import ErrorCode, NotServed
from bzzz.eventlog import Caller
from bzzz.network import partitions, subjects
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.jetstream import stream_name
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.projects import ProjectSet
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput
from bzzz.store.models import AgentRow, MessageRow, TaskRow, ThreadRow

pytestmark = pytest.mark.integration

WAIT = 30.0
StoreFactory = Callable[[str], Awaitable[str]]


def _settings(tmp_path: Path, name: str, nats_url: str, projects: list[str], url: str) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name), "database_url": url},
            "bzzz": {"nats_url": [nats_url], "heartbeat_interval": 0.5, "projects": projects},
            "conversation": {"escalation_rules": []},
        },
    )


async def _play(node: Node, project: str) -> dict[str, str]:
    """Two agents of ``project`` on ``node``: a note, a task, a thread with a post in it."""
    caller = Caller(f"{project}-session", LOCAL)
    lead, peer = f"lead-{project}", f"peer-{project}"
    for agent in (lead, peer):
        await node.agents.announce(
            caller, AnnounceInput(agent_id=agent, role="dev", project=project)
        )
    post = node.conversations.post
    await post(
        caller,
        PostInput(
            agent_id=lead,
            target_address=f"bzzz://{peer}",
            message_type="note",
            content={"text": f"note of {project}"},
        ),
    )
    assigned = await post(
        caller,
        PostInput(
            agent_id=lead,
            target_address=f"bzzz://{peer}",
            message_type="task_assignment",
            content={"task_type": "code_review", "description": f"review {project}"},
        ),
    )
    created = await node.conversations.thread(
        caller,
        ThreadInput(action="create", agent_id=lead, topic=f"design {project}", participants=[peer]),
    )
    thread_id = created["thread"]["id"] if "thread" in created else created["thread_id"]
    await post(
        caller,
        PostInput(
            agent_id=lead, thread_id=thread_id, message_type="text", content={"text": "in it"}
        ),
    )
    return {"thread": thread_id, "task": next(iter(assigned.get("tasks", {}).values()), "")}


async def _rows(node: Node) -> dict[str, Any]:
    async with node.db.session() as session:
        return {
            "agents": {r.id for r in await session.scalars(select(AgentRow))},
            "messages": {r.sender for r in await session.scalars(select(MessageRow))},
            "threads": {r.id for r in await session.scalars(select(ThreadRow))},
            "tasks": {r.id for r in await session.scalars(select(TaskRow))},
        }


async def _caught_up(*nodes: Node) -> None:
    for node in nodes:
        await node.projector.wait_for_sequence(await node.projector.log_end(), WAIT)


async def _consumer_filters(nats_url: str, durable: str) -> list[str]:
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().consumer_info(stream_name("main"), durable)
        return list(info.config.filter_subjects or [])
    finally:
        await nc.close()


async def test_a_node_stores_only_its_projects(
    tmp_path: Path, nats_url: str, new_store: StoreFactory
) -> None:
    urls = {name: await new_store(name) for name in ("every", "one", "two")}
    await _only_its_projects(tmp_path, nats_url, urls)


async def test_servers_that_partition_projects_change_nothing_a_node_sees(
    tmp_path: Path,
) -> None:
    """The same, on a server that spreads projects over 3 streams: p1 and p2 land in two of
    them, every node reads the one log, and a write waits for the log's copy."""
    assert {partitions.partition_of(p, 3) for p in ("p1", "p2")} == {1, 2}
    server = EmbeddedNats(tmp_path / "nats", partitions=3)
    await server.start()
    try:
        urls = {
            name: f"sqlite+aiosqlite:///{tmp_path / name}.db" for name in ("every", "one", "two")
        }
        await _only_its_projects(tmp_path, server.client_url, urls)
        nc = await nats.connect(server.client_url)
        try:
            held = [
                (await nc.jetstream().stream_info(partitions.stream_name("main", k))).state.messages
                for k in range(3)
            ]
        finally:
            await nc.close()
        assert held[1] > 0 and held[2] > 0
    finally:
        await server.close()


async def _only_its_projects(tmp_path: Path, nats_url: str, urls: dict[str, str]) -> None:
    every = _settings(tmp_path, "every", nats_url, ["*"], urls["every"])
    one = _settings(tmp_path, "one", nats_url, ["p1"], urls["one"])
    two = _settings(tmp_path, "two", nats_url, ["p2"], urls["two"])
    async with Node(every) as star, Node(one) as p1, Node(two) as p2:
        await admit(star, p1, p2)
        made1 = await _play(p1, "p1")
        made2 = await _play(p2, "p2")
        await _caught_up(star, p1, p2)

        held_by_star, held_by_p1, held_by_p2 = await _rows(star), await _rows(p1), await _rows(p2)
        # The * node holds both projects.
        assert {"lead-p1", "peer-p1", "lead-p2", "peer-p2"} <= held_by_star["agents"]
        assert {made1["thread"], made2["thread"]} <= held_by_star["threads"]
        assert {"lead-p1", "lead-p2"} <= held_by_star["messages"]
        # The p1 node holds p1 and nothing of p2; the p2 node the other way round.
        assert {"lead-p1", "peer-p1"} <= held_by_p1["agents"]
        assert not {"lead-p2", "peer-p2"} & held_by_p1["agents"]
        assert "lead-p2" not in held_by_p1["messages"]
        assert made1["thread"] in held_by_p1["threads"]
        assert made2["thread"] not in held_by_p1["threads"]
        assert made2["task"] and made2["task"] not in held_by_p1["tasks"]
        assert made1["task"] in held_by_p1["tasks"]
        assert not {"lead-p1", "peer-p1"} & held_by_p2["agents"]
        assert made1["thread"] not in held_by_p2["threads"]
        # Nothing of p2 even reached the p1 node: its consumer filtered it on the server.
        assert p1.projector.rejected["not_served"] == 0

        # A write about p2 on the p1 node is NotServed (NETWORK_ERROR) and stores nothing.
        before = await p1.bus.last_sequence()
        caller = Caller("intruder", LOCAL)
        with pytest.raises(NotServed) as refused:
            await p1.agents.announce(
                caller, AnnounceInput(agent_id="stray-p2", role="dev", project="p2")
            )
        assert refused.value.code == ErrorCode.NETWORK_ERROR
        assert refused.value.details == {"project": "p2"}
        with pytest.raises(NotServed):
            await p1.conversations.post(
                Caller("p1-session", LOCAL),
                PostInput(
                    agent_id="lead-p1",
                    target_address="bzzz://*:dev@p2",
                    message_type="note",
                    content={"text": "to p2"},
                ),
            )
        assert await p1.bus.last_sequence() == before

        # The server's consumer of the p1 node filters: network-wide kinds, p1 and "_".
        filters = await _consumer_filters(nats_url, p1.projector.durable)
        assert filters == subjects.consumer_filters("main", ProjectSet.of(["p1"]))
        assert "bzzz.main.p.p1.>" in filters and "bzzz.main.p._.>" in filters
        assert not [f for f in filters if "p2" in f]
        assert await _consumer_filters(nats_url, star.projector.durable) == []
        assert p1.status()["projects"] == ["p1"] and star.status()["projects"] == ["*"]
