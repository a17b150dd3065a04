"""Grants in the services: what a principal of one project may see and do in another."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.errors import AgentNotFound, BzzzError, PermissionDenied, RateLimited, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
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

P1 = principal("token:t1", "token", ["p1"], [ALL], Scope.WRITE, "team one")
P2 = principal("token:t2", "token", ["p2"], [ALL], Scope.WRITE, "team two")
READER = principal("token:r1", "token", ["p1"], [ALL], Scope.READ, "reader")
ADMIN1 = principal("token:a1", "token", ["p1"], [ALL], Scope.ADMIN, "admin one")
REVIEWERS_ONLY = principal("token:rv", "token", ["p1"], ["reviewer"], Scope.WRITE, "reviewers")


def as_(who: Principal, key: str | None = None) -> Caller:
    """A sessionless call by ``who`` (its agents held as the principal's)."""
    from bzzz.access.keys import principal_key

    return Caller(key or principal_key(who), who)


async def announce(node: Node, who: Principal, agent_id: str, **extra: Any) -> dict[str, Any]:
    params = AnnounceInput(agent_id=agent_id, role=extra.pop("role", "developer"), **extra)
    return await node.agents.announce(as_(who), params)


async def two_teams(node: Node) -> None:
    await announce(node, P1, "one-dev", project="p1")
    await announce(node, P1, "one-rev", role="reviewer", project="p1")
    await announce(node, P2, "two-dev", project="p2")


async def test_a_principal_announces_only_in_its_projects_and_defaults_to_its_one_project(
    node: Node,
) -> None:
    with pytest.raises(PermissionDenied) as refused:
        await announce(node, P2, "sneaky", project="p1")
    assert refused.value.details["missing"] == "project:p1"
    assert node.agents.directory.get("sneaky") is None

    made = await announce(node, P2, "two-dev")
    assert made["agent"]["project"] == "p2"


async def test_a_principal_announces_only_as_its_roles_and_read_announces_nothing(
    node: Node,
) -> None:
    with pytest.raises(PermissionDenied) as refused:
        await announce(node, REVIEWERS_ONLY, "dev-x", role="developer")
    assert refused.value.details["missing"] == "role:developer"
    with pytest.raises(PermissionDenied) as read_only:
        await announce(node, READER, "reader-1")
    assert read_only.value.details["missing"] == "scope:write"
    assert node.agents.directory.get("dev-x") is None
    assert node.agents.directory.get("reader-1") is None


async def test_lookup_and_completion_see_only_the_callers_projects(node: Node) -> None:
    await two_teams(node)

    seen = await node.agents.lookup(as_(P2), LookupInput(semantic_address="bzzz://*"))
    aimed = await node.agents.lookup(as_(P2), LookupInput(semantic_address="bzzz://*@p1:*"))
    everyone = await node.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address="bzzz://*"))

    assert [m["id"] for m in seen["matches"]] == ["two-dev"]
    assert seen["total_matches"] == 1
    assert aimed["matches"] == []
    assert {m["id"] for m in everyone["matches"]} == {"one-dev", "one-rev", "two-dev"}
    completions = node.agents.directory.completions("", 100, visible=frozenset({"p2"}))
    assert [c.split(":")[0] for c in completions] == ["two-dev"]


async def test_another_projects_agent_is_absent_and_its_inbox_unreadable(node: Node) -> None:
    await two_teams(node)

    for path in ("", "/inbox", "/tasks", "/threads"):
        with pytest.raises(AgentNotFound):
            await node.agents.get(as_(P2), GetInput(address=f"bzzz://one-dev{path}"))


async def test_only_owner_and_project_admin_read_an_inbox(node: Node) -> None:
    await two_teams(node)
    colleague = principal("token:t3", "token", ["p1"], [ALL], Scope.WRITE, "colleague")

    with pytest.raises(PermissionDenied) as refused:
        await node.agents.get(as_(colleague), GetInput(address="bzzz://one-dev/inbox"))
    info = await node.agents.get(as_(colleague), GetInput(address="bzzz://one-dev"))
    owner = await node.agents.get(as_(P1), GetInput(address="bzzz://one-dev/inbox"))
    admin = await node.agents.get(as_(ADMIN1), GetInput(address="bzzz://one-dev/inbox"))

    assert refused.value.details["missing"] == "owner_or_admin"
    assert "recent_activity" not in info["content"]
    assert info["content"]["agent_info"]["id"] == "one-dev"
    assert owner["content"]["messages"] == admin["content"]["messages"] == []


async def test_posting_into_another_project_reaches_nobody_there(node: Node) -> None:
    await two_teams(node)
    post = PostInput(
        target_address="bzzz://one-dev",
        message_type="task_assignment",
        content={"task_type": "code_review", "description": "x"},
    )

    with pytest.raises(AgentNotFound):
        await node.conversations.post(as_(P2), post)
    wildcard = await node.conversations.post(
        as_(P2),
        PostInput(target_address="bzzz://*", message_type="text", content={"text": "hi all"}),
    )

    assert wildcard["delivery_results"]["recipients"] == []
    inbox = await node.agents.get(as_(P1), GetInput(address="bzzz://one-dev/inbox"))
    tasks = await node.agents.get(as_(P1), GetInput(address="bzzz://one-dev/tasks"))
    assert inbox["content"]["messages"] == []
    assert tasks["content"]["tasks"] == []


async def test_a_thread_is_read_joined_and_summarized_by_every_credential_of_its_project_only(
    node: Node,
) -> None:
    await two_teams(node)
    created = await node.conversations.thread(
        as_(P1),
        ThreadInput(action="create", topic="design", participants=["one-rev"], agent_id="one-dev"),
    )
    thread_id = created["thread_id"]
    await announce(node, P1, "one-late", project="p1")
    teammate_in_p1 = principal("token:t4", "token", ["p1"], [ALL], Scope.WRITE, "teammate")
    await node.agents.announce(
        as_(teammate_in_p1), AnnounceInput(agent_id="one-out", role="developer")
    )

    for action in ("summarize", "join"):
        with pytest.raises(ThreadNotFound):
            await node.conversations.thread(
                as_(P2), ThreadInput(action=action, thread_id=thread_id)
            )
    with pytest.raises(ThreadNotFound):
        await node.agents.get(as_(P2), GetInput(address=f"bzzz://*/threads/{thread_id}"))
    # A teammate (a token of p1) reads the project's thread before any of its agents joins it.
    before = await node.agents.get(
        as_(teammate_in_p1), GetInput(address=f"bzzz://*/threads/{thread_id}")
    )
    assert before["content"]["thread"]["id"] == thread_id
    summary = await node.conversations.thread(
        as_(teammate_in_p1), ThreadInput(action="summarize", thread_id=thread_id)
    )
    assert summary["thread_id"] == thread_id

    joined = await node.conversations.thread(
        as_(teammate_in_p1), ThreadInput(action="join", thread_id=thread_id)
    )
    assert "one-out" in joined["result"]["participants"]


async def test_thread_participants_must_be_visible_to_the_creator(node: Node) -> None:
    await two_teams(node)

    with pytest.raises(AgentNotFound) as refused:
        await node.conversations.thread(
            as_(P1),
            ThreadInput(action="create", topic="t", participants=["two-dev"], agent_id="one-dev"),
        )
    assert refused.value.details["unknown"] == ["two-dev"]


async def test_read_scope_changes_nothing(node: Node) -> None:
    await two_teams(node)
    reader = as_(READER)
    with pytest.raises(BzzzError):
        await node.conversations.post(
            reader, PostInput(target_address="bzzz://one-dev", message_type="text", content={})
        )
    with pytest.raises(PermissionDenied):
        await node.conversations.thread(
            reader, ThreadInput(action="create", topic="t", participants=["one-dev"])
        )
    found = await node.agents.lookup(reader, LookupInput(semantic_address="bzzz://*"))
    assert {m["id"] for m in found["matches"]} == {"one-dev", "one-rev"}


async def test_another_principal_cannot_take_an_agent_and_its_owner_updates_it(
    node: Node,
) -> None:
    await two_teams(node)
    both = principal("token:t5", "token", ["p1", "p2"], [ALL], Scope.WRITE, "both")

    with pytest.raises(BzzzError, match="Agent ID already exists"):
        await announce(node, both, "one-dev", project="p1")
    again = await announce(node, P1, "one-dev", project="p1", capabilities=["go"])

    assert again["agent"]["capabilities"] == ["go"]
    assert node.agents.directory.get("one-dev").owner == P1.id  # type: ignore[union-attr]


async def test_subscriptions_collect_only_their_projects_events(node: Node) -> None:
    sub = await node.subscriptions.subscribe(
        as_(P2), SubscribeInput(event_types=["agent_announcement"])
    )
    await two_teams(node)

    events = await node.subscriptions.events(as_(P2), sub["subscription_id"])
    assert [e["data"]["agent"]["id"] for e in events["events"]] == ["two-dev"]
    with pytest.raises(BzzzError):
        await node.subscriptions.events(as_(P1), sub["subscription_id"])


async def test_one_principal_cannot_take_every_thread(settings: Any, memory_bus: Any) -> None:
    settings.conversation.max_active_threads = 4
    async with Node(settings, bus=memory_bus) as small:
        await announce(small, P1, "one-dev", project="p1")
        await announce(small, P2, "two-dev", project="p2")
        for n in range(2):
            await small.conversations.thread(
                as_(P1), ThreadInput(action="create", topic=f"t{n}", participants=["one-dev"])
            )
        with pytest.raises(RateLimited) as refused:
            await small.conversations.thread(
                as_(P1), ThreadInput(action="create", topic="t3", participants=["one-dev"])
            )
        other = await small.conversations.thread(
            as_(P2), ThreadInput(action="create", topic="mine", participants=["two-dev"])
        )
    assert refused.value.details["retry_after"] > 0
    assert other["success"] is True


async def test_one_session_without_credentials_cannot_take_every_thread(
    settings: Any, memory_bus: Any
) -> None:
    settings.conversation.max_active_threads = 4
    async with Node(settings, bus=memory_bus) as small:
        greedy, modest = Caller("mcp-greedy"), Caller("mcp-modest")
        await small.agents.announce(greedy, AnnounceInput(agent_id="g", role="dev"))
        await small.agents.announce(modest, AnnounceInput(agent_id="m", role="dev"))
        for n in range(2):
            await small.conversations.thread(
                greedy, ThreadInput(action="create", topic=f"t{n}", participants=["g"])
            )
        with pytest.raises(RateLimited):
            await small.conversations.thread(
                greedy, ThreadInput(action="create", topic="t3", participants=["g"])
            )
        other = await small.conversations.thread(
            modest, ThreadInput(action="create", topic="mine", participants=["m"])
        )
    assert other["success"] is True
