"""Threads read ``as_of`` a past point: concurrent reads of one principal all succeed on a real
nats-server, a read that starts from a checkpoint answers what a replay from nothing answers,
and a principal past its rate gets the seed's RATE_LIMITED error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from bzzz.config import Settings, load_settings
from bzzz.conversations.replay import CHECKPOINT_EVERY, Checkpoints, ThreadLog
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.mcp.server import build_server
from bzzz.network.base import BusMessage
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

POSTS = CHECKPOINT_EVERY * 2 + 30
WITHIN = 120


def node_settings(tmp_path: Path, nats_url: str | None, **limits: Any) -> Settings:
    """A node's settings on ``nats_url`` (None: the in-memory bus) with these limits."""
    overrides: dict[str, Any] = {"node": {"data_dir": str(tmp_path / "node")}, "limits": limits}
    if nats_url is not None:
        overrides["bzzz"] = {"nats_url": [nats_url]}
    return load_settings(environ={}, overrides=overrides)


async def thread_of(node: Node, posts: int) -> str:
    """A thread of two agents with ``posts`` posts in turn; its id."""
    for agent in ("arch", "dev"):
        await node.agents.announce(Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent))
    made = await node.conversations.thread(
        Caller("s-arch"), ThreadInput(action="create", topic="Q", participants=["dev"])
    )
    thread_id: str = made["thread_id"]
    for i in range(posts):
        await node.conversations.post(
            Caller("s-dev" if i % 2 else "s-arch"),
            PostInput(message_type="text", content={"text": f"m{i}"}, thread_id=thread_id),
        )
    return thread_id


async def read(node: Node, thread_id: str, as_of: int | str, caller: Caller = LOCAL_CALLER) -> Any:
    """The thread as it stood at ``as_of`` (its content)."""
    got = await node.agents.get(
        caller, GetInput(address=f"bzzz://*/threads/{thread_id}", as_of=as_of, max_history=50)
    )
    return got["content"]


def history(node: Node) -> ThreadLog:
    """The node's thread replayer (the log's reader)."""
    assert isinstance(node.agents.history, ThreadLog)
    return node.agents.history


@pytest.fixture
async def jetstream_node(tmp_path: Path, nats_url: str) -> AsyncIterator[tuple[Node, str]]:
    """A node on a real nats-server, as_of reads unlimited, and a thread of POSTS posts."""
    async with Node(node_settings(tmp_path, nats_url, as_of_reads_per_minute=0)) as node:
        yield node, await thread_of(node, POSTS)


@pytest.mark.integration
async def test_concurrent_as_of_reads_of_one_principal_all_succeed(
    jetstream_node: tuple[Node, str],
) -> None:
    node, thread_id = jetstream_node
    last = await node.bus.last_sequence()
    points = [last - 40 * k for k in range(6)]

    async def loop(offset: int) -> list[Any]:
        return [await read(node, thread_id, p - offset) for p in points]

    async with asyncio.timeout(WITHIN):
        answers = await asyncio.gather(*(loop(k) for k in range(4)), return_exceptions=True)

    failures = [a for a in answers if isinstance(a, BaseException)]
    assert failures == [], failures
    assert all(len(a) == len(points) for a in answers if isinstance(a, list))
    assert history(node).checkpoints.held > 0


@pytest.mark.integration
async def test_a_read_from_a_checkpoint_answers_what_a_replay_from_nothing_answers(
    jetstream_node: tuple[Node, str],
) -> None:
    node, thread_id = jetstream_node
    log = history(node)
    last = await node.bus.last_sequence()
    points = [last, last - 1, last - CHECKPOINT_EVERY - 7, last // 2, CHECKPOINT_EVERY + 3]
    warm = []
    async with asyncio.timeout(WITHIN):
        for point in points:
            await read(node, thread_id, point)  # keeps the checkpoints up to it
            warm.append(await read(node, thread_id, point))
        held = log.checkpoints.held
        scratch = []
        for point in points:
            log.checkpoints = Checkpoints(node.keyring)  # nothing to start from
            scratch.append(await read(node, thread_id, point))

    assert held > 0
    assert warm == scratch
    assert [len(c["thread"]["messages"]) for c in warm][:2] == [50, 50]
    assert warm[0]["as_of"]["sequence"] == last


class CountingBus(InMemoryBus):
    """The in-memory log, noting the sequences each ``read_kind`` returned."""

    def __init__(self) -> None:
        super().__init__()
        self.returned: list[int] = []

    async def read_kind(
        self,
        kind: str,
        key: str | None = None,
        *,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[BusMessage]:
        msgs = await super().read_kind(kind, key, before_seq=before_seq, after_seq=after_seq)
        self.returned.extend(m.seq for m in msgs)
        return msgs


async def test_a_read_from_a_checkpoint_fetches_only_the_envelopes_after_it(
    tmp_path: Path,
) -> None:
    bus = CountingBus()
    settings = node_settings(tmp_path, None, as_of_reads_per_minute=0)
    async with Node(settings, bus=bus) as node:
        thread_id = await thread_of(node, POSTS)
        log = history(node)
        last = await bus.last_sequence()
        await read(node, thread_id, last - 20)  # from nothing: keeps checkpoints up to it
        marks = log.checkpoints.marks(thread_id)
        start = max(m for m in marks if m <= last - 5)

        bus.returned.clear()
        warm = await read(node, thread_id, last - 5)
        fetched = list(bus.returned)
        log.checkpoints = Checkpoints(node.keyring)
        bus.returned.clear()
        cold = await read(node, thread_id, last - 5)

    assert len(marks) == POSTS // CHECKPOINT_EVERY
    assert fetched and min(fetched) > start  # nothing the checkpoint covers is read again
    assert len(fetched) <= last - start
    assert min(bus.returned) < start  # a replay from nothing reads the thread from its start
    assert warm == cold


async def test_a_read_at_a_time_from_a_checkpoint_answers_what_a_replay_from_nothing_answers(
    tmp_path: Path,
) -> None:
    bus = CountingBus()
    settings = node_settings(tmp_path, None, as_of_reads_per_minute=0)
    async with Node(settings, bus=bus) as node:
        thread_id = await thread_of(node, POSTS)
        log = history(node)
        entries = await log.entries(thread_id)
        await read(node, thread_id, await bus.last_sequence())  # keeps checkpoints
        marks = log.checkpoints.marks(thread_id)
        times = [e.time for e in entries[-CHECKPOINT_EVERY // 2 :: 7] if e.time]
        times.append(next(e.time for e in entries if e.seq > marks[0] and e.time))
        warm = []
        for time in times:
            bus.returned.clear()
            warm.append(await read(node, thread_id, time))
            fetched = list(bus.returned)
        cold = []
        for time in times:
            log.checkpoints = Checkpoints(node.keyring)
            cold.append(await read(node, thread_id, time))

    assert warm == cold
    assert min(fetched) > marks[0]  # the last, just past the first checkpoint, started there


async def test_a_removal_from_the_log_drops_the_checkpoints_made_before_it(
    tmp_path: Path,
) -> None:
    bus = CountingBus()
    settings = node_settings(tmp_path, None, as_of_reads_per_minute=0)
    async with Node(settings, bus=bus) as node:
        thread_id = await thread_of(node, POSTS)
        log = history(node)
        last = await bus.last_sequence()
        await read(node, thread_id, last)
        before = await read(node, thread_id, last)
        start = max(log.checkpoints.marks(thread_id))
        # Retention or erasure let a post before the checkpoint go from the log.
        posts = await bus.read_kind("msg", before_seq=start)
        await bus.delete(posts[-1].seq)

        bus.returned.clear()
        after = await read(node, thread_id, last)
        fetched = list(bus.returned)
        log.checkpoints = Checkpoints(node.keyring)
        cold = await read(node, thread_id, last)

    assert min(fetched) < start  # replayed from the log's start, not from the checkpoint
    assert after == cold
    assert after != before


async def test_as_of_reads_past_the_principal_rate_get_rate_limited(tmp_path: Path) -> None:
    settings = node_settings(tmp_path, None, as_of_reads_per_minute=1, as_of_reads_burst=2)
    async with Node(settings, bus=InMemoryBus()) as node:
        thread_id = await thread_of(node, 3)
        server, _ = build_server(node)
        address = f"bzzz://*/threads/{thread_id}"
        async with Client(server, mode="legacy") as client:
            answers = [
                await client.call_tool("bzzz_get", {"address": address, "as_of": 10_000 + i})
                for i in range(3)
            ]
            live = await client.call_tool("bzzz_get", {"address": address})

    assert [a.is_error for a in answers] == [False, False, True]
    refused = answers[2].structured_content
    assert refused is not None
    assert refused["code"] == "RATE_LIMITED"
    assert refused["details"]["limit"] == "as_of_reads_per_minute"
    assert 0 < refused["details"]["retry_after"] <= 60
    # Live reads are not as_of reads: the limit leaves them be.
    assert live.is_error is False
