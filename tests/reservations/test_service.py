"""bzzz_reserve on in-process nodes: conflicts, modes, release, renewal, expiry and its notice,
what ends a reservation and what does not, access."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from admitted import admit
from sqlalchemy import func, select, text

from bzzz.access.keys import STATELESS
from bzzz.agents.leases import Leases
from bzzz.clock import ManualClock
from bzzz.config import Settings, load_settings
from bzzz.domain import iso
from bzzz.errors import ErrorCode, InvalidParameters, PermissionDenied, ReservationConflict
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network import admission
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope, principal
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput, GetInput, SubscribeInput
from bzzz.store.models import ReservationRow

ALICE = Caller("alice-session")
BOB = Caller("bob-session")


def _settings(tmp_path: Path, name: str) -> Settings:
    return load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / name)}})


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
    params = AnnounceInput(agent_id=agent_id, role="developer", project=project)
    await node.agents.announce(caller, params)


async def _reserve(node: Node, caller: Caller, *paths: str, **fields: Any) -> dict[str, Any]:
    params = ReserveInput(action="reserve", paths=list(paths), **fields)
    return await node.reservations.reserve(caller, params)


async def _listed(node: Node, caller: Caller = LOCAL_CALLER, **fields: Any) -> list[dict[str, Any]]:
    shown = await node.reservations.reserve(caller, ReserveInput(action="list", **fields))
    return list(shown["reservations"])


async def _rows(node: Node) -> int:
    async with node.db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(ReservationRow)) or 0)


async def test_an_overlapping_exclusive_reservation_is_refused_naming_the_holder(
    node: Node,
) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    held = await _reserve(node, ALICE, "src/**", reason="refactoring")
    with pytest.raises(ReservationConflict) as refused:
        await _reserve(node, BOB, "src/api/*.py", "docs/x.md")

    assert held["reservation"]["paths"] == ["src/**"]
    assert held["reservation"]["mode"] == "exclusive"
    assert refused.value.code == ErrorCode.RESERVATION_CONFLICT
    holder = refused.value.details["holder"]
    assert holder["agent_id"] == "alice"
    assert holder["paths"] == ["src/**"]
    assert holder["expires_at"] == held["reservation"]["expires_at"]
    assert "alice" in refused.value.message and "src/api/*.py" in refused.value.message
    # The refusal changed nothing: bob holds none of the paths he asked for.
    assert [(r["agent_id"], r["paths"]) for r in await _listed(node)] == [("alice", ["src/**"])]


async def test_shared_reservations_coexist_but_exclude_an_exclusive_one(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    carol = Caller("carol-session")
    await _announce(node, carol, "carol")
    await _reserve(node, ALICE, "docs/**", mode="shared")
    await _reserve(node, BOB, "docs/*.md", mode="shared")
    with pytest.raises(ReservationConflict):
        await _reserve(node, carol, "docs/index.md")  # exclusive over shared ones
    await _reserve(node, ALICE, "lib/**")
    with pytest.raises(ReservationConflict):
        await _reserve(node, carol, "lib/x.py", mode="shared")  # shared over an exclusive one

    listed = await _listed(node)
    assert sorted((r["agent_id"], r["mode"]) for r in listed) == [
        ("alice", "exclusive"),
        ("alice", "shared"),
        ("bob", "shared"),
    ]


async def test_disjoint_patterns_and_an_agents_own_reservations_coexist(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    await _reserve(node, ALICE, "src/**")
    await _reserve(node, ALICE, "src/api/routes.py")  # its own: no conflict
    await _reserve(node, BOB, "docs/*.md", "[ab].txt")
    await _reserve(node, ALICE, "c.txt")

    assert len(await _listed(node)) == 4


async def test_another_project_does_not_conflict(node: Node) -> None:
    await _announce(node, ALICE, "alice", project="shop")
    await _announce(node, BOB, "bob", project="blog")
    await _reserve(node, ALICE, "src/**")
    await _reserve(node, BOB, "src/**")

    assert sorted((r["project"], r["agent_id"]) for r in await _listed(node)) == [
        ("blog", "bob"),
        ("shop", "alice"),
    ]


async def test_release_ends_a_reservation_and_frees_its_paths(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    first = (await _reserve(node, ALICE, "src/**"))["reservation"]
    await _reserve(node, ALICE, "README.md")
    released = await node.reservations.reserve(
        ALICE, ReserveInput(action="release", reservation_id=first["id"])
    )
    taken = await _reserve(node, BOB, "src/api/*.py")
    with pytest.raises(InvalidParameters) as again:
        await node.reservations.reserve(
            ALICE, ReserveInput(action="release", reservation_id=first["id"])
        )
    with pytest.raises(InvalidParameters):
        await node.reservations.reserve(
            BOB, ReserveInput(action="release", reservation_id=_id_of(await _listed(node), "alice"))
        )
    everything = await node.reservations.reserve(ALICE, ReserveInput(action="release"))

    assert released["released"] == [first["id"]]
    assert taken["reservation"]["agent_id"] == "bob"
    assert "holds no live reservation" in again.value.message
    assert len(everything["released"]) == 1
    assert [r["agent_id"] for r in await _listed(node)] == ["bob"]


def _id_of(listed: list[dict[str, Any]], agent_id: str) -> str:
    return str(next(r["id"] for r in listed if r["agent_id"] == agent_id))


async def test_expiry_frees_the_paths_and_leaves_no_expired_row(
    timed: Node, clock: ManualClock
) -> None:
    await _announce(timed, ALICE, "alice")
    await _announce(timed, BOB, "bob")
    held = (await _reserve(timed, ALICE, "src/**", ttl=60))["reservation"]
    await _reserve(timed, ALICE, "docs/**", ttl=600)
    clock.advance(61)
    listed = await _listed(timed)
    taken = await _reserve(timed, BOB, "src/api/*.py", ttl=30)
    clock.advance(30)
    swept = await timed.reservations.sweep()

    assert [r["paths"] for r in listed] == [["docs/**"]]  # reads never show an expired one
    assert taken["reservation"]["agent_id"] == "bob"
    assert swept is True
    async with timed.db.session() as session:
        left = (await session.scalars(select(ReservationRow))).all()
    assert [r.paths for r in left] == [["docs/**"]]
    assert all(r.expires_at > clock.now() for r in left)
    assert held["id"] not in {r.id for r in left}
    assert await timed.reservations.sweep() is False  # nothing expired: nothing published


async def test_renew_moves_the_expiry(timed: Node, clock: ManualClock) -> None:
    await _announce(timed, ALICE, "alice")
    await _announce(timed, BOB, "bob")
    held = (await _reserve(timed, ALICE, "src/**", ttl=60))["reservation"]
    clock.advance(50)
    renewed = await timed.reservations.reserve(ALICE, ReserveInput(action="renew", ttl=600))
    clock.advance(50)
    with pytest.raises(ReservationConflict):
        await _reserve(timed, BOB, "src/x.py")

    [after] = renewed["reservations"]
    assert after["id"] == held["id"]
    renewed_at = clock.now() - timedelta(seconds=50)
    assert after["expires_at"] == iso(renewed_at + timedelta(seconds=600))


async def test_a_reservation_outlives_its_agents_session_and_ends_when_it_is_erased(
    node: Node,
) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    await _reserve(node, ALICE, "src/**")
    await _reserve(node, BOB, "docs/**")
    await node.agents.session_ended(ALICE)
    with pytest.raises(ReservationConflict):
        await _reserve(node, BOB, "src/x.py")  # alice is offline; her reservation is not
    await node.retention.forget(LOCAL, "alice")
    taken = await _reserve(node, BOB, "src/**")
    await node.retention.forget(LOCAL, "bob")

    assert taken["reservation"]["agent_id"] == "bob"
    assert await _listed(node) == []
    assert await _rows(node) == 0


async def _events(node: Node, subscription: dict[str, Any]) -> list[dict[str, Any]]:
    read = await node.subscriptions.events(LOCAL_CALLER, subscription["subscription_id"])
    return list(read["events"])


async def test_a_reservation_outlives_its_agents_lease_and_ends_at_its_ttl_after_a_notice(
    timed: Node, clock: ManualClock
) -> None:
    lease_clock = [0.0]
    timed.agents.leases = Leases(120, clock=lambda: lease_clock[0])
    watching = await timed.subscriptions.subscribe(
        Caller("observer"), SubscribeInput(event_types=["reservation_expiring"])
    )
    announce = AnnounceInput(agent_id="quiet", role="developer", project="shop")
    handle = (await timed.agents.announce(Caller(STATELESS), announce))["agent_handle"]
    quiet = Caller(STATELESS, handle=handle)
    held = (await _reserve(timed, quiet, "src/**", ttl=1800))["reservation"]
    lease_clock[0] += 121
    clock.advance(121)
    expired = await timed.agents.expire_leases()
    await _announce(timed, BOB, "bob")
    with pytest.raises(ReservationConflict):
        await _reserve(timed, BOB, "src/x.py")
    early = await timed.reservations.sweep()  # nothing ends within the notice yet
    clock.advance(1800 - 121 - 30)  # 30 s before its end
    noticed = await timed.reservations.sweep()
    again = await timed.reservations.notice()  # told once per end
    events = await _events(timed, watching)
    with pytest.raises(ReservationConflict):
        await _reserve(timed, BOB, "src/x.py")
    clock.advance(30)
    taken = await _reserve(timed, BOB, "src/x.py")

    assert expired == ["quiet"]
    assert (early, noticed, again) == (False, True, False)
    [event] = events
    assert event["event_type"] == "reservation_expiring"
    assert event["data"]["reservation"]["id"] == held["id"]
    assert event["data"]["seconds_left"] == 30
    assert "quiet" in event["address"]
    assert taken["reservation"]["agent_id"] == "bob"
    assert [r["agent_id"] for r in await _listed(timed)] == ["bob"]


async def test_a_renewal_moves_the_end_and_its_notice_and_only_the_holder_renews(
    timed: Node, clock: ManualClock
) -> None:
    watching = await timed.subscriptions.subscribe(
        Caller("observer"), SubscribeInput(event_types=["reservation_expiring"])
    )
    await _announce(timed, ALICE, "alice")
    await _announce(timed, BOB, "bob")
    held = (await _reserve(timed, ALICE, "src/**", ttl=600))["reservation"]
    clock.advance(570)
    await timed.reservations.sweep()
    with pytest.raises(InvalidParameters) as not_his:
        await timed.reservations.reserve(
            BOB, ReserveInput(action="renew", reservation_id=held["id"], ttl=3600)
        )
    bobs = await timed.reservations.reserve(BOB, ReserveInput(action="renew", ttl=3600))
    renewed = await timed.reservations.reserve(
        ALICE, ReserveInput(action="renew", reservation_id=held["id"], ttl=600)
    )
    clock.advance(540)  # past the first end: still held
    with pytest.raises(ReservationConflict):
        await _reserve(timed, BOB, "src/x.py")
    await timed.reservations.sweep()  # 60 s before the new end: told again
    events = await _events(timed, watching)

    assert "holds no live reservation" in not_his.value.message
    assert bobs["reservations"] == []  # bob holds none: nothing of alice's moved
    [after] = renewed["reservations"]
    assert after["expires_at"] == iso(clock.now() - timedelta(seconds=540 - 600))
    assert [e["data"]["reservation"]["id"] for e in events] == [held["id"], held["id"]]
    assert [e["data"]["seconds_left"] for e in events] == [30, 60]


async def test_removing_a_node_ends_the_reservations_of_its_agents(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with (
        Node(_settings(tmp_path, "a"), bus=bus) as a,
        Node(_settings(tmp_path, "b"), bus=bus) as b,
    ):
        await admit(a, b)
        await _announce(b, BOB, "bob")
        await _reserve(b, BOB, "src/**")
        await _announce(a, ALICE, "alice")
        before = await _listed(a)
        # What `bzzz node remove` publishes, signed by an admitted node.
        outcome = await a.log.emit(
            admission.REMOVED, admission.KIND, b.node_id, {"node": b.node_id}
        )
        assert outcome.get("ok"), outcome
        taken = await _reserve(a, ALICE, "src/**")

    assert [r["agent_id"] for r in before] == ["bob"]
    assert taken["reservation"]["agent_id"] == "alice"


async def test_a_caller_without_an_agent_or_the_write_scope_reserves_nothing(node: Node) -> None:
    reader = principal("token:reader", "token", ["shop"], ["*"], Scope.READ)
    writer = principal("token:writer", "token", ["shop"], ["*"], Scope.WRITE)
    with pytest.raises(InvalidParameters) as no_agent:
        await _reserve(node, Caller("nobody"), "src/**")
    with pytest.raises(PermissionDenied) as read_only:
        await _reserve(node, Caller("reader", reader), "src/**")
    await _announce(node, Caller("writer", writer), "writer-agent")
    await _reserve(node, Caller("writer", writer), "src/**")

    assert "acts as no agent" in no_agent.value.message
    assert read_only.value.details["missing"] == "scope:write"
    assert len(await _listed(node, Caller("reader", reader))) == 1


async def test_a_principal_sees_only_its_projects_reservations(node: Node) -> None:
    await _announce(node, ALICE, "alice", project="shop")
    await _announce(node, BOB, "bob", project="blog")
    await _reserve(node, ALICE, "src/**")
    await _reserve(node, BOB, "src/**")
    blogger = Caller("blogger", principal("token:b", "token", ["blog"], ["*"], Scope.READ))

    assert [r["agent_id"] for r in await _listed(node, blogger)] == ["bob"]
    with pytest.raises(PermissionDenied):
        await _listed(node, blogger, project="shop")


async def test_list_narrows_to_an_agent_or_to_overlapping_paths(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    await _reserve(node, ALICE, "src/**")
    await _reserve(node, BOB, "docs/*.md")

    assert [r["agent_id"] for r in await _listed(node, agent_id="bob")] == ["bob"]
    assert [r["agent_id"] for r in await _listed(node, paths=["src/api/x.py"])] == ["alice"]


async def test_bzzz_get_answers_an_agents_reservations(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _reserve(node, ALICE, "src/**", reason="refactoring")
    got = await node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://alice@shop/reservations"))

    content = got["content"]
    assert got["metadata"]["content_type"] == "reservations"
    assert content["count"] == 1
    assert content["reservations"][0]["paths"] == ["src/**"]
    assert content["reservations"][0]["reason"] == "refactoring"


async def test_a_conflict_is_an_event_subscribers_receive(node: Node) -> None:
    sub = await node.subscriptions.subscribe(
        Caller("observer"), SubscribeInput(event_types=["reservation_conflict"])
    )
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    await _reserve(node, ALICE, "src/**")
    with pytest.raises(ReservationConflict):
        await _reserve(node, BOB, "src/x.py")
    events = (await node.subscriptions.events(LOCAL_CALLER, sub["subscription_id"]))["events"]

    [event] = events
    assert event["event_type"] == "reservation_conflict"
    assert event["data"]["holder"]["agent_id"] == "alice"
    assert event["data"]["requester"]["agent_id"] == "bob"
    assert event["data"]["overlap"] == ["src/x.py", "src/**"]


async def test_two_nodes_asking_at_once_never_both_hold_an_exclusive_reservation(
    tmp_path: Path,
) -> None:
    bus = InMemoryBus()
    async with (
        Node(_settings(tmp_path, "a"), bus=bus) as a,
        Node(_settings(tmp_path, "b"), bus=bus) as b,
    ):
        await admit(a, b)
        await _announce(a, ALICE, "alice")
        await _announce(b, BOB, "bob")
        wins = []
        for n in range(20):
            results = await asyncio.gather(
                _reserve(a, ALICE, f"src/{n}/**"),
                _reserve(b, BOB, f"src/{n}/api.py"),
                return_exceptions=True,
            )
            won = [r for r in results if isinstance(r, dict)]
            assert len(won) == 1, results
            assert all(isinstance(r, ReservationConflict) for r in results if r not in won)
            wins.append(won[0]["reservation"]["agent_id"])
        on_a, on_b = await _listed(a), await _listed(b)

    assert on_a == on_b
    assert len(on_a) == 20


async def test_conflicts_erasure_and_release_hold_on_sqlite_and_postgresql(
    store_node: Node,
) -> None:
    node = store_node
    await _announce(node, ALICE, "alice")
    await _announce(node, BOB, "bob")
    held = await _reserve(node, ALICE, "src/**", "README.md", reason="sealed reason")
    with pytest.raises(ReservationConflict):
        await _reserve(node, BOB, "src/a/b.py")
    await _reserve(node, BOB, "docs/**", mode="shared")
    listed = await _listed(node)
    await node.agents.session_ended(BOB)
    released = await node.reservations.reserve(ALICE, ReserveInput(action="release"))
    kept = [r["agent_id"] for r in await _listed(node)]  # bob's outlives his session
    await node.retention.forget(LOCAL, "bob")

    assert [(r["agent_id"], r["paths"], r["reason"]) for r in listed] == [
        ("alice", ["src/**", "README.md"], "sealed reason"),
        ("bob", ["docs/**"], None),
    ]
    assert released["released"] == [held["reservation"]["id"]]
    assert kept == ["bob"]
    assert await _rows(node) == 0


async def test_the_store_holds_paths_and_reasons_sealed(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _reserve(node, ALICE, "secret-dir-7c1f/**", reason="REASON-CANARY-44e0")
    async with node.db.session() as session:
        raw = (await session.execute(text("SELECT paths, reason FROM reservations"))).all()

    assert len(raw) == 1
    stored = " ".join(str(value) for value in raw[0])
    assert "secret-dir-7c1f" not in stored and "REASON-CANARY-44e0" not in stored


async def test_an_agents_content_counts_its_reservations(node: Node) -> None:
    await _announce(node, ALICE, "alice")
    await _reserve(node, ALICE, "src/**")
    await _reserve(node, ALICE, "docs/**", mode="shared")
    got = await node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://alice"))

    assert got["content"]["reservation_count"] == 2


async def test_an_agent_announced_again_in_another_project_lets_go_of_the_old_ones(
    node: Node,
) -> None:
    await _announce(node, ALICE, "alice", project="shop")
    await _reserve(node, ALICE, "src/**")
    await _announce(node, ALICE, "alice", project="shop")  # the same project: kept
    kept = await _listed(node)
    await _announce(node, ALICE, "alice", project="blog")

    assert [r["project"] for r in kept] == ["shop"]
    assert await _listed(node) == []
