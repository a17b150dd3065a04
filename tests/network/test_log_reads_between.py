"""A read of the log between two sequences (``read_kind``'s ``after_seq`` and ``before_seq``)
fetches only what lies between, on a real nats-server and on the in-memory bus; the log's
``removed_count`` grows with every removal and never with an append (what an as_of
checkpoint's validity rests on)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bzzz.network import subjects
from bzzz.network.base import Bus
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.memory import InMemoryBus


@pytest.fixture(params=[pytest.param("jetstream", marks=pytest.mark.integration), "memory"])
async def bus(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Bus]:
    """A real nats-server's log or the in-memory one."""
    if request.param == "memory":
        yield InMemoryBus()
        return
    server = EmbeddedNats(tmp_path / "nats")
    await server.start()
    made = JetStreamBus([server.client_url], "main")
    try:
        await made.start()
        yield made
    finally:
        await made.close()
        await server.close()


async def _published(bus: Bus) -> list[int]:
    """Ten posts of agents a and b in turn, and an agent envelope between each pair."""
    seqs = []
    for i in range(10):
        agent = "a" if i % 2 == 0 else "b"
        subject = subjects.subject("main", "msg", agent, None)
        seqs.append(await bus.publish(subject, f"m{i}".encode(), f"m{i}"))
        await bus.publish(subjects.subject("main", "agent", agent, None), b"x", f"agent-{i}")
    return seqs


async def test_a_read_between_two_sequences_returns_only_what_lies_between(bus: Bus) -> None:
    seqs = await _published(bus)

    between = await bus.read_kind("msg", after_seq=seqs[3], before_seq=seqs[8])
    assert [m.data for m in between] == [b"m4", b"m5", b"m6", b"m7"]
    after = await bus.read_kind("msg", "a", after_seq=seqs[5])
    assert [m.data for m in after] == [b"m6", b"m8"]
    assert await bus.read_kind("msg", after_seq=seqs[-1]) == []
    assert await bus.read_kind("msg", after_seq=seqs[4], before_seq=seqs[4] + 1) == []
    everything = await bus.read_kind("msg", after_seq=0)
    assert [m.data for m in everything] == [f"m{i}".encode() for i in range(10)]


async def test_the_removed_count_grows_with_each_removal_and_never_with_an_append(
    bus: Bus,
) -> None:
    assert await bus.removed_count() == 0
    seqs = await _published(bus)
    assert await bus.removed_count() == 0

    await bus.delete(seqs[4])
    assert await bus.removed_count() == 1
    await bus.publish(subjects.subject("main", "msg", "a", None), b"later", "later")
    assert await bus.removed_count() == 1
    await bus.purge("msg", "b", before_seq=seqs[6])  # m1, m3, m5
    assert await bus.removed_count() == 4
    left = await bus.read_kind("msg", after_seq=seqs[0])
    assert [m.data for m in left] == [b"m2", b"m6", b"m7", b"m8", b"m9", b"later"]
