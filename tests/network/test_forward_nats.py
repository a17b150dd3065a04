"""Forwarding's queue group on nats-server: a `*` member and a `p2` member share p2's calls."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from e2e.support import eventually

from bzzz.network.forward import QUEUE, forward_subject
from bzzz.network.jetstream import JetStreamBus

pytestmark = pytest.mark.integration

NET = "qnet"


@contextlib.asynccontextmanager
async def _member(
    nats_url: str, project: str, name: str, seen: Counter[str]
) -> AsyncIterator[None]:
    bus = JetStreamBus([nats_url], NET, create=False)
    await bus.start()
    ready = asyncio.Event()

    async def handler(data: bytes) -> bytes:
        seen[name] += 1
        return name.encode()

    async def serve() -> None:
        ready.set()
        await bus.serve_requests([forward_subject(NET, project)], QUEUE, handler)

    task = asyncio.create_task(serve())
    try:
        await ready.wait()
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await bus.close()


async def _answered(bus: JetStreamBus, subject: str) -> bytes | None:
    # A subscription is live once the server has it: ask until someone answers (bounded).
    return await eventually(lambda: bus.request(subject, b"?", 1.0), lambda a: a is not None)


async def test_one_member_of_the_queue_group_answers_each_call_whatever_subject_it_matched(
    nats_url: str,
) -> None:
    seen: Counter[str] = Counter()
    caller = JetStreamBus([nats_url], NET, create=False)
    await caller.start()
    try:
        async with _member(nats_url, "*", "every", seen), _member(nats_url, "p2", "p2", seen):
            p2 = forward_subject(NET, "p2")
            await _answered(caller, p2)
            await _answered(caller, forward_subject(NET, "p7"))
            seen.clear()
            answers = [await caller.request(p2, b"call", 2.0) for _ in range(60)]
            only_every = [await caller.request(forward_subject(NET, "p7"), b"c", 2.0)]
        nobody = await caller.request(p2, b"call", 2.0)
    finally:
        await caller.close()

    # Exactly one answer per call (60 calls, 60 handler runs + 1 for p7), both members took some.
    assert sum(seen.values()) == 61
    assert seen["p2"] > 0 and seen["every"] > 1
    assert sorted(set(answers)) == [b"every", b"p2"]
    assert only_every == [b"every"]
    assert nobody is None  # no member left: no responders, at once
