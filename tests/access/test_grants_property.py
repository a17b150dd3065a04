"""Property: whatever random principals do, none reads an inbox, thread or event off its grants."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bzzz.access.keys import principal_key
from bzzz.address import parse_address
from bzzz.config import load_settings
from bzzz.errors import BzzzError
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import ALL, Principal, Scope, principal
from bzzz.schemas import (
    AnnounceInput,
    GetInput,
    LookupInput,
    PostInput,
    SubscribeInput,
    ThreadInput,
)

PRINCIPALS = [
    principal("token:one", "token", ["p1"], [ALL], Scope.WRITE),
    principal("token:two", "token", ["p2"], [ALL], Scope.WRITE),
    principal("token:both", "token", ["p1", "p2"], [ALL], Scope.WRITE),
    principal("token:look", "token", ["p2"], [ALL], Scope.READ),
]
AGENTS = ["a0", "a1", "a2", "a3", "a4"]

who = st.integers(0, len(PRINCIPALS) - 1)
agent = st.sampled_from(AGENTS)
op = st.one_of(
    # Mostly a project the principal holds (index into its grants), sometimes any project.
    st.tuples(st.just("announce"), who, agent, st.integers(0, 3)),
    st.tuples(st.just("post"), who, agent, agent),
    st.tuples(st.just("thread"), who, agent, st.lists(agent, min_size=1, max_size=3)),
    st.tuples(st.just("inbox"), who, agent),
    st.tuples(st.just("read_thread"), who, st.integers(0, 5)),
    st.tuples(st.just("lookup"), who),
)


@dataclass
class World:
    """What the scenario did, and the subscriptions each principal holds."""

    node: Node
    threads: list[str] = field(default_factory=list)
    subscriptions: dict[int, str] = field(default_factory=dict)


def caller(n: int) -> Caller:
    return Caller(principal_key(PRINCIPALS[n]), PRINCIPALS[n])


def owns(p: Principal, node: Node, agent_id: str) -> bool:
    found = node.agents.directory.get(agent_id)
    return found is not None and found.owner == p.id


async def step(world: World, action: tuple[Any, ...]) -> None:
    node, kind, n = world.node, action[0], action[1]
    p = PRINCIPALS[n]
    try:
        if kind == "announce":
            mine = sorted(p.projects)
            project = mine[action[3] % len(mine)] if action[3] < 3 else "p1"
            await node.agents.announce(
                caller(n), AnnounceInput(agent_id=action[2], role="dev", project=project)
            )
        elif kind == "post":
            await node.conversations.post(
                caller(n),
                PostInput(
                    target_address=f"bzzz://{action[3]}",
                    message_type="text",
                    content={"text": "hello"},
                    agent_id=action[2],
                ),
            )
        elif kind == "thread":
            made = await node.conversations.thread(
                caller(n),
                ThreadInput(action="create", topic="t", participants=action[3], agent_id=action[2]),
            )
            world.threads.append(made["thread_id"])
        elif kind == "inbox":
            got = await node.agents.get(caller(n), GetInput(address=f"bzzz://{action[2]}/inbox"))
            # Read: so the caller owns the agent (write-scope principals are not admins).
            assert owns(p, node, action[2]), (p.id, action[2])
            assert got["content"]["agent_info"]["project"] in p.projects
        elif kind == "read_thread" and world.threads:
            thread_id = world.threads[action[2] % len(world.threads)]
            got = await node.agents.get(
                caller(n), GetInput(address=f"bzzz://*/threads/{thread_id}")
            )
            members = got["content"]["thread"]["participants"]
            assert any(owns(p, node, m) for m in members), (p.id, members)
        elif kind == "lookup":
            found = await node.agents.lookup(caller(n), LookupInput(semantic_address="bzzz://*"))
            assert all(m["project"] in p.projects for m in found["matches"])
    except BzzzError:
        pass  # a refusal is always allowed; what is checked is what was shown


async def scenario(actions: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_settings(environ={}, overrides={"node": {"data_dir": str(Path(tmp) / "n")}})
        async with Node(cfg, bus=InMemoryBus()) as node:
            world = World(node)
            for n in range(len(PRINCIPALS)):
                sub = await node.subscriptions.subscribe(
                    caller(n), SubscribeInput(event_types=["agent_announcement", "thread_created"])
                )
                world.subscriptions[n] = sub["subscription_id"]
            for action in actions:
                await step(world, action)
            for n, sub_id in world.subscriptions.items():
                events = await node.subscriptions.events(caller(n), sub_id, limit=1000)
                for event in events["events"]:
                    project = parse_address(event["address"]).project
                    assert project in PRINCIPALS[n].projects, (PRINCIPALS[n].id, event)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(op, min_size=3, max_size=14))
def test_no_principal_ever_reads_what_it_has_no_grant_for(actions: list[tuple[Any, ...]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(actions), 60))
