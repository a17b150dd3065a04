"""Path reservations across two `bzzz serve` nodes: one winner when both ask at once, every time."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from mcp import ClientSession

from .conftest import NodeFactory
from .support import (
    CALL_TIMEOUT,
    call,
    eventually,
    http_session,
    start_network,
)

pytestmark = pytest.mark.integration

ROUNDS = 100


async def _reserve(session: ClientSession, **arguments: Any) -> dict[str, Any]:
    """bzzz_reserve's structured answer, success or ErrorResponse."""
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await session.call_tool("bzzz_reserve", arguments)
    body = dict(result.structured_content or {})
    assert body.get("success") is (not result.is_error), body
    return body


async def _holders(session: ClientSession) -> list[tuple[str, str, list[str]]]:
    listed = await call(session, "bzzz_reserve", {"action": "list"})
    return sorted((r["agent_id"], r["mode"], r["paths"]) for r in listed["reservations"])


async def test_two_nodes_reserving_overlapping_paths_at_once_get_one_winner_each_round(
    make_node: NodeFactory,
) -> None:
    a, b = make_node("a"), make_node("b")
    await start_network(a, b)
    async with (
        http_session(a.mcp_url) as alice,
        http_session(b.mcp_url) as carol,
    ):
        await call(alice, "bzzz_announce", {"agent_id": "alice", "role": "dev", "project": "shop"})
        await call(carol, "bzzz_announce", {"agent_id": "carol", "role": "dev", "project": "shop"})
        # Expires while the rounds run (10 s is the shortest ttl).
        brief = await _reserve(carol, paths=["tmp/**"], ttl=10)
        async with http_session(b.mcp_url) as bob:
            await call(bob, "bzzz_announce", {"agent_id": "bob", "role": "dev", "project": "shop"})
            winners = await _rounds(alice, bob)

            # Shared reservations coexist, on both nodes.
            await _reserve(alice, paths=["docs/**"], mode="shared")
            await _reserve(bob, paths=["docs/*.md"], mode="shared")
            shared = [("alice", "shared", ["docs/**"]), ("bob", "shared", ["docs/*.md"])]
            for session in (alice, bob):
                held = await eventually(
                    lambda s=session: _holders(s),
                    lambda h: sum(1 for x in h if x[1] == "shared") >= 2,
                )
                assert [h for h in held if h[1] == "shared"] == shared
            exclusive = await _reserve(carol, paths=["docs/index.md"])
            assert exclusive["code"] == "RESERVATION_CONFLICT"

        # Bob's session ended: bob went offline, his reservation did not (it lives by its
        # own clock): both nodes still list it below.
        # Carol's ten-second reservation expired: alice takes its paths.
        taken = await eventually(
            lambda: _reserve(alice, paths=["tmp/x.txt"]), lambda got: got["success"], within=30
        )
        on_a, on_b = await _holders(alice), await _holders(carol)

    assert winners["alice"] + winners["bob"] == ROUNDS
    # Both nodes won rounds: the requests did meet (51/49 in a measured run).
    assert winners["alice"] > 0 and winners["bob"] > 0
    expired = datetime.fromisoformat(brief["reservation"]["expires_at"])
    assert expired <= datetime.fromisoformat(taken["reservation"]["created_at"])
    assert on_a == on_b
    assert ("bob", "shared", ["docs/*.md"]) in on_a
    assert ("carol", "exclusive", ["tmp/**"]) not in on_a


async def _rounds(alice: ClientSession, bob: ClientSession) -> dict[str, int]:
    """Alice (node A) and Bob (node B) ask for overlapping exclusive paths at the same moment;
    exactly one gets them, the other is told who holds them; the winner releases."""
    winners = {"alice": 0, "bob": 0}
    for n in range(ROUNDS):
        first, second = await asyncio.gather(
            _reserve(alice, paths=["src/**"], reason=f"round {n}"),
            _reserve(bob, paths=["src/api/*.py"], reason=f"round {n}"),
        )
        won = [r for r in (first, second) if r["success"]]
        lost = [r for r in (first, second) if not r["success"]]
        assert len(won) == 1 and len(lost) == 1, (n, first, second)
        winner = won[0]["reservation"]
        assert lost[0]["code"] == "RESERVATION_CONFLICT", lost[0]
        holder = lost[0]["details"]["holder"]
        assert holder["agent_id"] == winner["agent_id"]
        assert holder["paths"] == winner["paths"]
        assert holder["expires_at"] == winner["expires_at"]
        winners[winner["agent_id"]] += 1
        releaser = alice if winner["agent_id"] == "alice" else bob
        released = await _reserve(releaser, action="release", reservation_id=winner["id"])
        assert released["released"] == [winner["id"]]
    return winners
