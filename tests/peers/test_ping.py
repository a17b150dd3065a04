"""Ping/pong between nodes: only signed, admitted, addressed pings are answered; only the pinged
peer's pong carrying the ping's nonce is counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.peers.latency import PING, PONG, Pinger

NETWORK = "main"


def _pinger(bus: InMemoryBus, me: NodeIdentity, admitted: set[str] | None = None) -> Pinger:
    admits = None if admitted is None else (lambda key, node_id: node_id in admitted)
    return Pinger(bus, me, NETWORK, trusted=None, admits=admits, timeout=1.0)


@pytest.fixture
async def bus() -> AsyncIterator[InMemoryBus]:
    yield InMemoryBus()


async def _serving(bus: InMemoryBus, node_id: str, pinger: Pinger) -> asyncio.Task[None]:
    task = asyncio.create_task(bus.serve_pings(node_id, pinger.answer))
    await asyncio.sleep(0)  # let it register
    return task


async def test_a_round_trip_to_a_peer_is_timed_and_kept(bus: InMemoryBus) -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    pa, pb = _pinger(bus, a), _pinger(bus, b)
    serving = await _serving(bus, b.node_id, pb)
    try:
        first = await pa.ping(b.node_id)
        await pa.round([b.node_id])
    finally:
        serving.cancel()
    trips = pa.round_trips[b.node_id]
    assert first is not None and first > 0
    assert (trips.count, trips.timeouts) == (2, 0)
    assert trips.last_ms is not None and trips.last_ms > 0
    assert pa.summary() == {b.node_id: trips.last_ms}


async def test_an_unadmitted_node_gets_no_answer(bus: InMemoryBus) -> None:
    a, b, stranger = (NodeIdentity.generate() for _ in range(3))
    pb = _pinger(bus, b, admitted={a.node_id, b.node_id})
    serving = await _serving(bus, b.node_id, pb)
    try:
        refused = await _pinger(bus, stranger).ping(b.node_id)
        answered = await _pinger(bus, a).ping(b.node_id)
    finally:
        serving.cancel()
    assert refused is None and answered is not None
    assert pb.refused == 1


async def test_a_ping_addressed_to_another_node_or_forged_is_not_answered(
    bus: InMemoryBus,
) -> None:
    a, b = NodeIdentity.generate(), NodeIdentity.generate()
    pa, pb = _pinger(bus, a), _pinger(bus, b)
    elsewhere = pa._seal(PING, "node-somewhere-else", "n1")
    assert await pb.answer(elsewhere) is None
    tampered = pa._seal(PING, b.node_id, "n2").replace(b'"n2"', b'"n3"')
    assert await pb.answer(tampered) is None
    assert await pb.answer(b"not an envelope") is None
    assert pb.refused == 3


async def test_only_the_pinged_peers_pong_with_the_pings_nonce_counts(bus: InMemoryBus) -> None:
    a, b, impostor = (NodeIdentity.generate() for _ in range(3))
    pa = _pinger(bus, a)
    liar = _pinger(bus, impostor)

    async def someone_else_answers(data: bytes) -> bytes:
        return liar._seal(PONG, a.node_id, "whatever")

    async def an_old_pong(data: bytes) -> bytes:
        return _pinger(bus, b)._seal(PONG, a.node_id, "an-earlier-nonce")

    for handler in (someone_else_answers, an_old_pong):
        serving = asyncio.create_task(bus.serve_pings(b.node_id, handler))
        await asyncio.sleep(0)
        try:
            assert await pa.ping(b.node_id) is None
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
    assert (pa.round_trips[b.node_id].count, pa.round_trips[b.node_id].timeouts) == (0, 2)
    assert pa.summary() == {}


async def test_a_round_pings_a_few_peers_at_a_time_and_in_turn_reaches_each(
    bus: InMemoryBus,
) -> None:
    # Pinging every peer each interval costs a network N·(N-1) pings: a round takes the few
    # peers measured least, so 20 peers are each measured once in three rounds of 8.
    me = NodeIdentity.generate()
    peers = [NodeIdentity.generate() for _ in range(20)]
    pingers = {p.node_id: _pinger(bus, p) for p in peers}
    serving = [await _serving(bus, node_id, pinger) for node_id, pinger in pingers.items()]
    mine = _pinger(bus, me)
    try:
        await mine.round(pingers)
        assert len(mine.round_trips) == 8
        await mine.round(pingers)
        await mine.round(pingers)
    finally:
        for task in serving:
            task.cancel()
    assert set(mine.round_trips) == set(pingers)
    assert sorted(t.count for t in mine.round_trips.values()) == [1] * 16 + [2] * 4
    assert all(t.timeouts == 0 for t in mine.round_trips.values())
