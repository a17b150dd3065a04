"""Fencing tokens and the reservation check, on in-process nodes: who may write a path now,
with which token, who holds it otherwise, why an ended reservation's holder may no longer, and
the reservation_refused event of an enforced refusal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bzzz.access.keys import principal_key
from bzzz.clock import ManualClock
from bzzz.config import Settings
from bzzz.errors import AgentNotFound, InvalidParameters, PermissionDenied
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import ALL, LOCAL, Principal, Scope
from bzzz.reservations.check import MAX_PATH_LENGTH, MAX_PATHS
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput, SubscribeInput

ALICE = Caller("alice-session")
BOB = Caller("bob-session")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def timed(
    settings: Settings, memory_bus: InMemoryBus, clock: ManualClock
) -> AsyncIterator[Node]:
    """A node whose clock moves only when the test says so."""
    async with Node(settings, bus=memory_bus, clock=clock) as running:
        yield running


async def _announce(node: Node, caller: Caller, agent_id: str, project: str = "shop") -> None:
    await node.agents.announce(
        caller, AnnounceInput(agent_id=agent_id, role="developer", project=project)
    )


async def _reserve(node: Node, caller: Caller, *paths: str, **fields: Any) -> dict[str, Any]:
    made = await node.reservations.reserve(
        caller, ReserveInput(action="reserve", paths=list(paths), **fields)
    )
    return dict(made["reservation"])


async def _check(node: Node, agent: str, *paths: str, **fields: Any) -> dict[str, Any]:
    return await node.reservations.check(LOCAL_CALLER, agent, list(paths), **fields)


async def _pair(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")


async def test_a_second_grant_of_the_same_path_has_a_larger_fencing_token_and_a_renewal_keeps_it(
    store_node: Node,
) -> None:
    node = store_node
    await _pair(node)
    first = await _reserve(node, ALICE, "src/**")
    renewed = await node.reservations.reserve(ALICE, ReserveInput(action="renew", ttl=900))
    listed = await node.reservations.reserve(LOCAL_CALLER, ReserveInput(action="list"))
    await node.reservations.reserve(ALICE, ReserveInput(action="release"))
    second = await _reserve(node, BOB, "src/api/x.py")
    carol = Caller("carol-session")
    await _announce(node, carol, "carol", project="blog")
    elsewhere = await _reserve(node, carol, "src/**")

    assert first["fencing_token"] >= 1
    assert [r["fencing_token"] for r in renewed["reservations"]] == [first["fencing_token"]]
    assert [r["fencing_token"] for r in listed["reservations"]] == [first["fencing_token"]]
    assert second["fencing_token"] > first["fencing_token"]
    # Another project counts on its own.
    assert elsewhere["fencing_token"] == 1


async def test_the_check_allows_the_holder_and_refuses_another_agent_naming_the_holder(
    node: Node,
) -> None:
    await _pair(node)
    held = await _reserve(node, ALICE, "src/api/**", "README.md")
    mine = await _check(node, "alice", "src/api/routes.py", "docs/x.md")
    theirs = await _check(node, "bob", "src/api/routes.py", "docs/x.md", "./README.md")

    assert mine["allowed"] is True
    covered, free = mine["paths"]
    assert covered["allowed"] and covered["fencing_token"] == held["fencing_token"]
    assert covered["reservation_id"] == held["id"] and covered["reason"] == "held"
    assert free == {
        "path": "docs/x.md",
        "allowed": True,
        "fencing_token": None,
        "reservation_id": None,
        "expires_at": None,
        "reason": "unreserved",
        "holder": None,
        "ended": None,
    }
    assert theirs["allowed"] is False and theirs["agent"] == "bob"
    refused, other, readme = theirs["paths"]
    assert (refused["allowed"], other["allowed"], readme["allowed"]) == (False, True, False)
    assert readme["path"] == "README.md"
    assert refused["reason"] == "reserved_by_other" and refused["fencing_token"] is None
    assert refused["holder"] == {
        "agent": "alice",
        "reservation_id": held["id"],
        "paths": ["src/api/**", "README.md"],
        "expires_at": held["expires_at"],
        "fencing_token": held["fencing_token"],
        "exclusive": True,
    }


async def test_a_path_held_shared_by_others_is_allowed_and_names_them(node: Node) -> None:
    await _pair(node)
    await _reserve(node, ALICE, "docs/**", mode="shared")
    answer = await _check(node, "bob", "docs/a.md")

    [item] = answer["paths"]
    assert answer["allowed"] is True and item["reason"] == "shared_by_others"
    assert item["holder"]["agent"] == "alice" and item["holder"]["exclusive"] is False


async def test_after_a_release_the_other_agent_is_allowed_and_the_holder_is_told_it_released(
    store_node: Node,
) -> None:
    node = store_node
    await _pair(node)
    held = await _reserve(node, ALICE, "src/**")
    await node.reservations.reserve(ALICE, ReserveInput(action="release"))
    other = await _check(node, "bob", "src/a.py")
    holder = await _check(node, "alice", "src/a.py")

    assert other["allowed"] is True and other["paths"][0]["holder"] is None
    [item] = holder["paths"]
    assert item["allowed"] is True and item["fencing_token"] is None
    assert item["reason"] == "released"
    assert item["ended"]["reservation_id"] == held["id"]
    assert item["ended"]["fencing_token"] == held["fencing_token"]
    assert item["ended"]["reason"] == "released"


async def test_an_expired_holder_is_told_so_with_its_token_and_a_later_grant_outranks_it(
    timed: Node, clock: ManualClock
) -> None:
    await _pair(timed)
    held = await _reserve(timed, ALICE, "src/**", ttl=60)
    clock.advance(61)
    before_sweep = await _check(timed, "alice", "src/a.py")
    taken = await _reserve(timed, BOB, "src/a.py")  # sweeps alice's first
    after = await _check(timed, "alice", "src/a.py")

    [item] = before_sweep["paths"]
    assert item["reason"] == "expired" and item["ended"]["fencing_token"] == held["fencing_token"]
    assert item["ended"]["ended_at"] == held["expires_at"]
    [late] = after["paths"]
    assert late["allowed"] is False and late["reason"] == "expired"
    assert late["ended"]["reservation_id"] == held["id"]
    assert late["holder"]["agent"] == "bob"
    assert late["holder"]["fencing_token"] == taken["fencing_token"] > held["fencing_token"]


async def test_an_erased_agents_check_says_it_was_forgotten(node: Node) -> None:
    await _pair(node)
    held = await _reserve(node, ALICE, "src/**")
    await node.retention.forget(LOCAL, "alice")
    answer = await _check(node, "alice", "src/a.py")

    [item] = answer["paths"]
    assert item["reason"] == "forgotten" and item["ended"]["reservation_id"] == held["id"]
    with pytest.raises(AgentNotFound):
        await _check(node, "nobody", "src/a.py")


async def test_an_enforced_refusal_gives_a_subscriber_a_reservation_refused_event(
    node: Node,
) -> None:
    await _pair(node)
    watching = await node.subscriptions.subscribe(
        Caller("observer"), SubscribeInput(event_types=["reservation_refused"])
    )
    held = await _reserve(node, ALICE, "src/**")
    await _check(node, "bob", "src/a.py")  # not enforced: nothing recorded
    await _check(node, "bob", "src/a.py", "docs/b.md", "src/c.py", enforce=True, source="guard")
    await _check(node, "alice", "src/a.py", enforce=True, source="hook")  # allowed: nothing
    read = await node.subscriptions.events(LOCAL_CALLER, watching["subscription_id"])

    [event] = read["events"]
    assert event["event_type"] == "reservation_refused"
    assert "bob" in event["address"]
    data = event["data"]
    assert data["agent_id"] == "bob" and data["source"] == "guard"
    assert data["paths"] == ["src/a.py", "src/c.py"] and data["refused_count"] == 2
    assert data["holder"]["agent"] == "alice"
    assert data["holder"]["reservation_id"] == held["id"]


async def agent_token(
    node: Node, agent: str, project: str = "shop", scope: Scope = Scope.WRITE
) -> Principal:
    _record, secret = await node.access.create_token(
        LOCAL, agent, [project], [ALL], scope, None, agent=agent
    )
    who = await node.access.authenticate(f"Bearer {secret}")
    assert who is not None and who.agent == agent
    return who


async def test_an_agent_token_checks_as_its_own_agent_only(node: Node) -> None:
    await _pair(node)
    await _reserve(node, ALICE, "src/**")
    bob = await agent_token(node, "bob")
    reader = await agent_token(node, "bob", scope=Scope.READ)
    as_bob = Caller(principal_key(bob), bob)
    answer = await node.reservations.check(as_bob, "bob", ["src/a.py"])
    with pytest.raises(PermissionDenied) as as_alice:
        await node.reservations.check(as_bob, "alice", ["src/a.py"])
    with pytest.raises(PermissionDenied) as enforced:
        await node.reservations.check(
            Caller(principal_key(reader), reader), "bob", ["src/a.py"], enforce=True
        )

    assert answer["allowed"] is False
    assert as_alice.value.details["missing"] == "agent:alice"
    assert enforced.value.details["missing"] == "scope:write"


@pytest.mark.parametrize(
    ("paths", "field"),
    [
        ([], "paths"),
        (["src/../etc/passwd"], "paths.0"),
        (["a", "/"], "paths.1"),
        (["x" * (MAX_PATH_LENGTH + 1)], "paths.0"),
        (["a"] * (MAX_PATHS + 1), "paths"),
        (["bad\\path"], "paths.0"),
    ],
)
async def test_a_check_outside_its_bounds_is_refused_naming_the_field(
    node: Node, paths: list[str], field: str
) -> None:
    await _pair(node)
    with pytest.raises(InvalidParameters) as refused:
        await _check(node, "bob", *paths)
    assert refused.value.details["field"] == field


async def test_an_agent_that_moved_to_another_project_is_told_its_reservation_moved(
    node: Node,
) -> None:
    await _pair(node)
    held = await _reserve(node, ALICE, "src/**")
    await _announce(node, ALICE, "alice", project="blog")
    shop_admin = await node.access.create_token(LOCAL, "admin", ["shop"], [ALL], Scope.ADMIN, None)
    who = await node.access.authenticate(f"Bearer {shop_admin[1]}")
    assert who is not None
    answer = await node.reservations.check(Caller(principal_key(who), who), "alice", ["src/a"])
    in_blog = await _check(node, "alice", "src/a")  # the local user sees its project now

    [item] = answer["paths"]
    assert answer["project"] == "shop" and item["reason"] == "moved"
    assert item["ended"]["reservation_id"] == held["id"]
    assert in_blog["project"] == "blog" and in_blog["paths"][0]["reason"] == "unreserved"
