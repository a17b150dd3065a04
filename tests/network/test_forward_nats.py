"""Forwarding's queue group on nats-server: a `*` member and a `p2` member share p2's calls."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from e2e.support import eventually
from nats.js.api import StorageType

from bzzz.network.base import Unanswered
from bzzz.network.forward import ONCE_TTL, QUEUE, forward_subject
from bzzz.network.jetstream import JetStreamBus
from bzzz.network.once import JetStreamOnce, once_bucket

pytestmark = pytest.mark.integration

NET = "qnet"


@contextlib.asynccontextmanager
async def _member(
    nats_url: str, project: str, name: str, seen: Counter[str]
) -> AsyncIterator[None]:
    bus = JetStreamBus([nats_url], NET, create=False)
    await bus.start()

    async def handler(data: bytes, reply: str) -> bytes:
        if data != b"ready?":
            seen[name] += 1
        return name.encode()

    # A subject of its own, subscribed after the forwarding one on the same connection: once it
    # answers, the server has both.
    own = f"_test.{NET}.ready.{name}"
    subjects = [forward_subject(NET, project), own]
    task = asyncio.create_task(bus.serve_requests(subjects, QUEUE, handler))
    try:
        await eventually(lambda: bus.request(own, b"ready?", 1.0), lambda a: a is not None)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await bus.close()


async def test_one_member_of_the_queue_group_answers_each_call_whatever_subject_it_matched(
    nats_url: str,
) -> None:
    seen: Counter[str] = Counter()
    caller = JetStreamBus([nats_url], NET, create=False)
    await caller.start()
    try:
        async with _member(nats_url, "*", "every", seen), _member(nats_url, "p2", "p2", seen):
            p2 = forward_subject(NET, "p2")
            answers = [await caller.request(p2, b"call", 2.0) for _ in range(60)]
            only_every = [await caller.request(forward_subject(NET, "p7"), b"c", 2.0)]
            handled = sum(seen.values())

        async def after_both_left() -> bytes | None:
            try:
                return await caller.request(p2, b"call", 0.5)
            except Unanswered:
                return b"(the server still routed it to a member that was leaving)"

        nobody = await eventually(after_both_left, lambda answer: answer is None)
    finally:
        await caller.close()

    # Exactly one answer per call (60 calls, 60 handler runs + 1 for p7), both members took some.
    assert handled == 61
    assert seen["p2"] > 0 and seen["every"] > 1
    assert sorted(set(answers)) == [b"every", b"p2"]
    assert only_every == [b"every"]
    assert nobody is None  # no member left: no responders, at once


async def test_a_slow_call_holds_up_no_other_call_of_the_same_member(nats_url: str) -> None:
    bus = JetStreamBus([nats_url], NET, create=False)
    await bus.start()
    release = asyncio.Event()

    async def handler(data: bytes, reply: str) -> bytes:
        if data == b"slow":
            await release.wait()
        return data

    subject = forward_subject(NET, "p9")
    serving = asyncio.create_task(bus.serve_requests([subject], QUEUE, handler))
    try:
        await eventually(lambda: bus.request(subject, b"?", 1.0), lambda a: a is not None)
        slow = asyncio.create_task(bus.request(subject, b"slow", 5.0))
        quick = await bus.request(subject, b"quick", 2.0)  # answered while "slow" waits
        assert not slow.done()
        release.set()
        assert await slow == b"slow"
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await bus.close()
    assert quick == b"quick"


async def test_a_request_on_a_reply_subject_of_the_bus_is_answered_there_and_told_to_the_handler(
    nats_url: str,
) -> None:
    bus = JetStreamBus([nats_url], NET, create=False)
    await bus.start()
    heard: list[str] = []

    async def handler(data: bytes, reply: str) -> bytes:
        heard.append(reply)
        return data.upper()

    subject = forward_subject(NET, "p8")
    serving = asyncio.create_task(bus.serve_requests([subject], QUEUE, handler))
    try:
        await eventually(lambda: bus.request(subject, b"?", 1.0), lambda a: a is not None)
        inboxes = [bus.new_inbox() for _ in range(3)]
        answers = await asyncio.gather(
            *(
                bus.request(subject, f"call {n}".encode(), 2.0, reply=r)
                for n, r in enumerate(inboxes)
            )
        )
        nobody = await bus.request(forward_subject(NET, "none"), b"x", 2.0, reply=bus.new_inbox())
        with pytest.raises(ValueError):
            await bus.request(subject, b"x", 1.0, reply="_INBOX.not-mine.1")
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await bus.close()
    assert answers == [b"CALL 0", b"CALL 1", b"CALL 2"]
    assert set(inboxes) <= set(heard)  # each handler run was told its own reply subject
    assert len(set(inboxes)) == 3
    assert nobody is None  # no responders: at once, as without a reply subject of its own


async def test_a_request_id_claimed_through_one_connection_is_refused_through_every_other(
    nats_url: str,
) -> None:
    buses = [JetStreamBus([nats_url], NET, create=False) for _ in range(2)]
    for bus in buses:
        await bus.start()
    try:
        first, second = (JetStreamOnce(bus.client, NET, ONCE_TTL) for bus in buses)
        claims = [await first.claim("01ID-A"), await second.claim("01ID-A")]
        claims += [await second.claim("01ID-B"), await first.claim("01ID-B")]
        info = await buses[0].client.jetstream().stream_info(f"KV_{once_bucket(NET)}")
    finally:
        for bus in buses:
            await bus.close()
    assert claims == [True, False, True, False]
    # Kept in memory on the servers, each id past its window and no longer.
    assert info.config.storage == StorageType.MEMORY
    assert info.config.max_age == ONCE_TTL


async def test_nodes_binding_the_used_ids_at_once_each_get_the_bucket_and_one_claim_wins(
    nats_url: str,
) -> None:
    # Eight nodes meet a network with no bucket yet at the same moment: whoever creates it,
    # the others bind to it, and of eight claims of one id exactly one is granted.
    buses = [JetStreamBus([nats_url], "racenet", create=True) for _ in range(8)]
    for bus in buses:
        await bus.start()
    try:
        claims = await asyncio.gather(
            *(JetStreamOnce(bus.client, "racenet", ONCE_TTL).claim("01ID-RACE") for bus in buses)
        )
    finally:
        for bus in buses:
            await bus.close()
    assert sorted(claims) == [False] * 7 + [True]


async def test_a_claim_tried_again_after_an_unanswered_create_knows_its_own_key(
    nats_url: str,
) -> None:
    # The first create is stored but its answer never comes: the retry finds the key, and
    # reads that it holds this claim's token, so the claim is granted, not taken as a replay.
    bus = JetStreamBus([nats_url], NET, create=True)
    await bus.start()
    try:
        once = JetStreamOnce(bus.client, NET, ONCE_TTL)
        kv = await once._bound()
        real_create = kv.create
        calls = 0

        async def lost_answer(key: str, value: bytes) -> int:
            nonlocal calls
            calls += 1
            seq = await real_create(key, value)
            if calls == 1:
                raise TimeoutError("the answer was lost")
            return seq

        kv.create = lost_answer  # type: ignore[method-assign]
        granted = await once.claim("01ID-LOST")
        replayed = await JetStreamOnce(bus.client, NET, ONCE_TTL).claim("01ID-LOST")
    finally:
        await bus.close()
    assert (granted, replayed, calls) == (True, False, 2)
