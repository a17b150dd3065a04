"""Projects spread over several streams by the engine's partitioning (``network.partitions``).

A real nats-server whose configuration maps project subjects with ``partition(3, …)`` (the
embedded server's ``partitions`` setting): the bus finds N from the servers, a project's
envelopes land in its partition's stream and the network's stream copies them in, in order;
erasure and retention remove both copies; a log kept from before the mapping goes on; a
mapping taken away again is a clear error, not a silent split.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from bzzz.errors import NetworkError
from bzzz.network import partitions, subjects
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.jetstream import JetStreamBus, stream_name
from bzzz.projects import subject_token

pytestmark = pytest.mark.integration

N = 3


def _project_in(index: int) -> str:
    """A project id the servers put in partition ``index`` of N."""
    return next(f"proj{i}" for i in range(1000) if partitions.partition_of(f"proj{i}", N) == index)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[EmbeddedNats]:
    embedded = EmbeddedNats(tmp_path / "nats", partitions=N)
    await embedded.start()
    try:
        yield embedded
    finally:
        await embedded.close()


@pytest.fixture
async def bus(server: EmbeddedNats) -> AsyncIterator[JetStreamBus]:
    bus = JetStreamBus([server.client_url], "main")
    await bus.start()
    try:
        yield bus
    finally:
        await bus.close()


async def _counts(url: str) -> dict[str, int]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        names = [stream_name("main"), *(partitions.stream_name("main", k) for k in range(N))]
        return {name: int((await js.stream_info(name)).state.messages) for name in names}
    finally:
        await nc.close()


async def test_the_bus_finds_the_servers_partitions_and_the_hash_agrees(
    bus: JetStreamBus, server: EmbeddedNats, tmp_path: Path
) -> None:
    # 96 probe tokens each landed where partition_of says, for N = 3 and no other N.
    assert bus.partitions == N
    # The probes went where no stream stores them: the log and its partitions are empty,
    # a second node's probes included.
    second = JetStreamBus([server.client_url], "main")
    await second.start()
    await second.close()
    assert set((await _counts(server.client_url)).values()) == {0}
    # A server without the mapping: one stream, as before.
    plain = EmbeddedNats(tmp_path / "plain")
    await plain.start()
    try:
        other = JetStreamBus([plain.client_url], "main")
        await other.start()
        assert other.partitions == 1
        # A second node probes a server whose log exists already.
        second = JetStreamBus([plain.client_url], "main")
        await second.start()
        assert second.partitions == 1
        await second.close()
        nc = await nats.connect(plain.client_url)
        try:
            held = await nc.jetstream().stream_info(stream_name("main"))
        finally:
            await nc.close()
        assert held.state.messages == 0  # a probe stored in the log would be a bad envelope
        await other.close()
    finally:
        await plain.close()


async def test_a_projects_envelopes_land_in_its_partition_and_the_log_copies_them_in(
    bus: JetStreamBus, server: EmbeddedNats
) -> None:
    projects = [_project_in(k) for k in range(N)]
    sent = []
    for round_ in range(4):
        for project in projects:
            subject = subjects.subject("main", "msg", f"a-{round_}", project)
            stored = await bus.store(
                subject, f"{project}-{round_}".encode(), f"id-{project}-{round_}"
            )
            # Acknowledged by the project's partition, with that stream's own sequence.
            assert stored.stream == partitions.stream_name(
                "main", partitions.partition_of(subject_token(project), N)
            )
            sent.append((subject, await bus.logged(stored, subject)))
    wide = await bus.store("bzzz.main.node.n1", b"wide", "id-wide")
    assert wide.stream is None  # network-wide kinds go to the log itself

    # The log holds every envelope once, at the sequence ``logged`` gave, in the order each
    # partition took them; each partition holds only its projects'.
    msgs = await bus.read_kind("msg")
    assert [(m.subject, m.seq) for m in msgs] == sorted(sent, key=lambda pair: pair[1])
    for project in projects:
        mine = [
            m.data.decode() for m in msgs if subjects.project_token("main", m.subject) == project
        ]
        assert mine == [f"{project}-{r}" for r in range(4)]
    counts = await _counts(server.client_url)
    assert counts[stream_name("main")] == 13
    assert all(counts[partitions.stream_name("main", k)] == 4 for k in range(N))

    # A retried publish (same id) is a duplicate in its partition, stored once.
    again = await bus.store(sent[0][0], b"again", f"id-{projects[0]}-0")
    assert again.duplicate
    assert len(await bus.read_kind("msg")) == 12


async def test_erasure_and_retention_remove_both_copies(
    bus: JetStreamBus, server: EmbeddedNats
) -> None:
    """Envelopes of two projects in partitions 1 and 2, two agents each, interleaved."""
    projects = [_project_in(1), _project_in(2)]
    seqs = []
    for i in range(8):
        subject = subjects.subject("main", "msg", f"agent-{i % 2}", projects[i // 2 % 2])
        seqs.append(await bus.publish(subject, f"m{i}".encode(), f"m{i}"))
    # Erasure of one envelope: gone from the log and from its partition.
    await bus.delete(seqs[0])
    assert await bus.get(seqs[0]) is None
    counts = await _counts(server.client_url)
    assert counts[partitions.stream_name("main", 1)] == 3
    assert counts[partitions.stream_name("main", 2)] == 4
    # Retention of agent-1's messages below the 6th envelope: m1 (partition 1) and m3
    # (partition 2) go from every stream; m5 and m7 (after the cut) and agent-0's stay.
    await bus.purge("msg", "agent-1", before_seq=seqs[5])
    left = [m.data.decode() for m in await bus.read_kind("msg")]
    assert left == ["m2", "m4", "m5", "m6", "m7"]
    counts = await _counts(server.client_url)
    assert counts[partitions.stream_name("main", 1)] == 2  # m4, m5
    assert counts[partitions.stream_name("main", 2)] == 3  # m2, m6, m7
    assert counts[stream_name("main")] == 5


async def test_a_log_kept_from_before_the_mapping_goes_on(tmp_path: Path) -> None:
    project = _project_in(2)
    subject = subjects.subject("main", "msg", "old", project)
    before = EmbeddedNats(tmp_path / "nats")
    await before.start()
    try:
        bus = JetStreamBus([before.client_url], "main")
        await bus.start()
        first = await bus.publish(subject, b"before", "before")
        await bus.close()
    finally:
        await before.close()
    # The same store, now with the mapping: the log keeps what it held, and takes the
    # project's new envelopes from the partition after it.
    after = EmbeddedNats(tmp_path / "nats", partitions=N)
    await after.start()
    try:
        bus = JetStreamBus([after.client_url], "main")
        await bus.start()
        assert bus.partitions == N
        stored = await bus.store(subject, b"after", "after")
        assert stored.stream == partitions.stream_name("main", 2)
        second = await bus.logged(stored, subject)
        assert second > first
        assert [m.data for m in await bus.read_kind("msg")] == [b"before", b"after"]
        await bus.close()
    finally:
        await after.close()
    # The mapping taken away again: the log would split, so the node says so and stops.
    again = EmbeddedNats(tmp_path / "nats")
    await again.start()
    try:
        bus = JetStreamBus([again.client_url], "main")
        with pytest.raises(NetworkError, match="no longer partition"):
            await bus.start()
        await bus.close()
    finally:
        await again.close()


async def test_the_log_place_of_each_of_many_envelopes_on_one_subject(
    bus: JetStreamBus,
) -> None:
    """Twenty envelopes on one subject, stored at once: ``logged`` finds each one's place,
    walking back over those copied in after it, and they are the log's order."""
    subject = subjects.subject("main", "msg", "busy", _project_in(0))
    stored = await asyncio.gather(
        *(bus.store(subject, f"b{i}".encode(), f"busy-{i}") for i in range(20))
    )
    places = [await bus.logged(one, subject) for one in stored]
    logged = {m.seq: m.data for m in await bus.read_kind("msg", "busy")}
    assert len(set(places)) == 20
    assert sorted(places) == sorted(logged)
    # Each place holds that envelope (the partition's order is the log's).
    by_partition_seq = sorted(zip((s.seq for s in stored), places, strict=True))
    assert [logged[place] for _, place in by_partition_seq] == [logged[p] for p in sorted(logged)]


async def test_no_client_writes_the_header_that_names_a_copy(
    bus: JetStreamBus, server: EmbeddedNats
) -> None:
    """Erasure and retention follow the log's ``Nats-Stream-Source`` headers to the partitions'
    copies: the servers refuse that header from a client (a holder of the NATS login cannot
    point them at another message), and the copy of a real envelope is deleted with it."""
    subject = subjects.subject("main", "msg", "kept", _project_in(0))
    seq = await bus.publish(subject, b"kept", "kept")
    nc = await nats.connect(server.client_url)
    try:
        js = nc.jetstream()
        with pytest.raises(nats.js.errors.BadRequestError, match="source header"):
            await js.publish(
                "bzzz.main.msg.legacy",
                b"forged",
                headers={"Nats-Stream-Source": f"{partitions.stream_name('main', 0)} 1 > > x x"},
            )
        await bus.delete(seq)
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.get_msg(partitions.stream_name("main", 0), 1)
    finally:
        await nc.close()
