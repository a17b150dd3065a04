"""Issue 32: a reservation request's check is bounded, serves others meanwhile, and answers
the truth when the network's acknowledgement comes late."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client

from bzzz.errors import NetworkError
from bzzz.eventlog import Caller
from bzzz.network.base import Stored
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.reservations.globs import MAX_PATTERN_LENGTH
from bzzz.reservations.projection import MAX_PATHS, PER_PROJECT
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput, LookupInput

FILLER = Caller("filler-session")
ATTACKER = Caller("attacker-session")
READER = Caller("reader-session")
WAIT = 10.0  # generous: the check at the caps takes well under a second


def _tag(n: int) -> str:
    letters = "bcdefghijklmnopqrstuvwxyz"
    return letters[n % 25] + letters[n // 25 % 25] + letters[n // 625 % 25]


def _stars(n: int, end: str) -> str:
    """The issue's shape (``*a*a*…*x``) at the limits: 16 wildcards, 256 characters."""
    body = ("*" + "a" * 14) * 15 + "*" + _tag(n)
    return body[: MAX_PATTERN_LENGTH - 1] + end


def _sets(n: int, end: str) -> str:
    """A looped segment with sets, starting and ending with a wildcard (no early answer)."""
    return "*" + "a" * 8 + "*" + "a" * 8 + "*" + "a" * 4 + "*" + _tag(n) + end + "*"


def _plain_sets(n: int, end: str) -> str:
    return "?" + "a" * 26 + _tag(n) + end + "?"


async def _announce(node: Node, caller: Caller, agent_id: str) -> None:
    await node.agents.announce(caller, AnnounceInput(agent_id=agent_id, role="dev", project="shop"))


async def _reserve_while_others_read(node: Node, requested: list[str]) -> tuple[Any, list[int]]:
    """Ask for ``requested`` while another client makes 20 reads; the answer, and how many
    reads were done when it came (all 20 must complete, the request must return)."""
    done_when_answered: list[int] = []
    reads = 0

    async def reader() -> None:
        nonlocal reads
        for _ in range(20):
            await node.agents.lookup(READER, LookupInput(semantic_address="bzzz://*@shop"))
            reads += 1

    async def request() -> Any:
        answer = await node.reservations.reserve(ATTACKER, ReserveInput(paths=requested))
        done_when_answered.append(reads)
        return answer

    async with asyncio.timeout(WAIT):
        answer, _ = await asyncio.gather(request(), reader())
    assert reads == 20
    return answer, done_when_answered


async def test_the_issues_16_by_16_shapes_are_answered_while_another_client_is_served(
    node: Node,
) -> None:
    await _announce(node, FILLER, "filler")
    await _announce(node, ATTACKER, "attacker")
    live = [_stars(n, "y") for n in range(MAX_PATHS)]
    await node.reservations.reserve(FILLER, ReserveInput(paths=live))

    answer, _ = await _reserve_while_others_read(node, [_stars(n, "x") for n in range(MAX_PATHS)])

    assert answer["reservation"]["agent_id"] == "attacker"  # disjoint: granted


async def test_a_request_at_the_documented_caps_is_answered_while_another_client_is_served(
    node: Node,
) -> None:
    await _announce(node, FILLER, "filler")
    await _announce(node, ATTACKER, "attacker")
    # The most a request is checked against: the project's 1,024 patterns less its own 16.
    for k in range(PER_PROJECT // MAX_PATHS - 1):
        paths = [_sets(k * MAX_PATHS + n, "y") for n in range(MAX_PATHS)]
        await node.reservations.reserve(FILLER, ReserveInput(paths=paths))
    live = sum(len(r["paths"]) for r in await _listed(node))

    answer, _ = await _reserve_while_others_read(
        node, [_plain_sets(n, "x") for n in range(MAX_PATHS)]
    )

    assert live == PER_PROJECT - MAX_PATHS
    assert answer["reservation"]["agent_id"] == "attacker"


async def _listed(node: Node) -> list[dict[str, Any]]:
    shown = await node.reservations.reserve(FILLER, ReserveInput(action="list"))
    return list(shown["reservations"])


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("*a" * 256, "at most 256 characters"),  # the issue's own shape
        ("*a" * 20, "at most 16 wildcards"),
        ("/".join(["a"] * 33), "at most 32 segments"),
        ("src/" + "?" + "a" * 32, "at most 32 characters"),
    ],
)
async def test_an_oversize_shape_is_refused_naming_the_field_and_changes_nothing(
    node: Node, pattern: str, says: str
) -> None:
    from bzzz.mcp.server import build_server

    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        await _call(client, "bzzz_announce", {"agent_id": "alice", "role": "dev", "project": "p"})
        refused = await _call(client, "bzzz_reserve", {"paths": ["docs/**", pattern]})
        listed = await _call(client, "bzzz_reserve", {"action": "list"})

    assert refused["code"] == "INVALID_PARAMETERS"
    assert refused["details"]["problems"][0]["field"] == "paths.1"
    assert says in refused["error"]
    assert listed["reservations"] == []


async def test_a_late_acknowledgement_still_answers_the_outcome_the_log_holds(
    node: Node, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _announce(node, FILLER, "alice")
    store = memory_bus.store
    late: list[str] = []

    async def stored_but_unacknowledged(subject: str, data: bytes, msg_id: str) -> Stored:
        stored = await store(subject, data, msg_id)
        if ".reservation." in subject and not late:
            late.append(msg_id)  # the stream holds it; the publisher hears nothing in time
            raise NetworkError("the network did not store the message in time; it was not posted")
        return stored

    monkeypatch.setattr(memory_bus, "store", stored_but_unacknowledged)
    answer = await node.reservations.reserve(FILLER, ReserveInput(paths=["src/**"]))
    listed = await _listed(node)

    assert late == [answer["reservation"]["id"]]
    assert [r["id"] for r in listed] == late  # granted, once
