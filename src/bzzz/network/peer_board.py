"""The peer board: a network's JetStream key-value bucket of heartbeats, put, read and watched.

What a node reads here is written by anyone holding the NATS login: the board hands bytes to
its callers (``peers/`` verifies each entry's signature), and a watch that goes quiet is
rebuilt, since its ephemeral consumer may have been lost with a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from nats.errors import BadSubscriptionError
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue

from bzzz.errors import NetworkError
from bzzz.network.base import PeerHandler
from bzzz.network.deliveries import still_wanted
from bzzz.network.nats_calls import RETRYABLE, retried

logger = logging.getLogger(__name__)

# A watch that hears nothing this long is rebuilt (its ephemeral consumer may have been lost
# with a server); a node's own heartbeats keep a healthy watch of its own keys busy (a watch of
# keys no node beats under is rebuilt every this many seconds, a consumer made again).
PEER_WATCH_IDLE = 30.0
# The server drops a watch's consumer this long after its node stopped reading it (a watch
# made again, a node gone); nats-py's default of 5 minutes let a busy cluster's rebuilt
# watches pile up to the server's limit of consumers on the board.
PEER_WATCH_GONE = 15.0
PEER_ENTRY_MAX_AGE = 7 * 86_400.0

_QUIET = object()


def peer_bucket(network: str) -> str:
    """The JetStream key-value bucket that holds a network's peer board."""
    return f"bzzz_peers_{network}"


async def _next_entry(watcher: KeyValue.KeyWatcher, within: float) -> Any:
    """The watcher's next entry, or _QUIET after ``within`` seconds of silence.

    Not ``watcher.updates(timeout)``: it rests on ``asyncio.wait_for``, which on Python 3.11 can
    swallow a cancellation that arrives with an update, and a stopping node then waits forever.
    """
    try:
        async with asyncio.timeout(within):
            return await anext(watcher)
    except TimeoutError:
        return _QUIET
    except StopAsyncIteration:
        return _QUIET


class PeerBoard:
    """One network's board, on the JetStream context the bus gives it (made on first use)."""

    def __init__(
        self,
        jetstream: Callable[[], JetStreamContext],
        network: str,
        *,
        replicas: int,
        within: float,
    ) -> None:
        self._jetstream = jetstream
        self._network = network
        self._replicas = replicas
        self._within = within
        self._kv: KeyValue | None = None

    def forget(self) -> None:
        """Drop the bucket's handle (its connection closed)."""
        self._kv = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            js = self._jetstream()
            bucket = peer_bucket(self._network)
            try:
                self._kv = await js.key_value(bucket)
            except BucketNotFoundError:
                self._kv = await js.create_key_value(
                    KeyValueConfig(
                        bucket=bucket,
                        history=1,
                        ttl=PEER_ENTRY_MAX_AGE,
                        storage=StorageType.FILE,
                        replicas=self._replicas,
                    )
                )
        return self._kv

    async def put(self, key: str, data: bytes) -> None:
        """Replace an entry, retrying until the bus's publish timeout (a bucket just created
        on a cluster answers "no stream response" until its leader is elected)."""

        async def put() -> None:
            await (await self._bucket()).put(key, data)

        await retried("the peer board did not take the heartbeat", put, self._within)

    async def delete(self, key: str) -> None:
        """Take an entry off the board (a delete marker: its watchers see it go)."""

        async def delete() -> None:
            await (await self._bucket()).delete(key)

        await retried("the peer board did not take the removal", delete, self._within)

    async def entries(self) -> dict[str, bytes]:
        """The board as it is now: key -> newest heartbeat."""
        kv = await self._bucket()
        watcher = await kv.watchall(ignore_deletes=True)
        entries: dict[str, bytes] = {}
        try:
            while True:
                entry = await _next_entry(watcher, self._within)
                if entry is _QUIET:
                    raise NetworkError("the peer board did not answer in time")
                if entry is None:  # the end of the current entries
                    return entries
                if entry.value is not None:
                    entries[entry.key] = entry.value
        finally:
            with contextlib.suppress(*RETRYABLE, BadSubscriptionError):
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py: untyped

    async def watch(self, handler: PeerHandler, patterns: Sequence[str] = (">",)) -> None:
        """The entries under ``patterns``, then their changes, until cancelled: one watch (an
        ordered consumer) a pattern, each rebuilt when it goes quiet."""
        async with asyncio.TaskGroup() as group:
            for pattern in patterns:
                group.create_task(self._watch_pattern(pattern, handler))

    async def _watch_pattern(self, pattern: str, handler: PeerHandler) -> None:
        while True:
            try:
                watcher = await (await self._bucket()).watch(
                    pattern, inactive_threshold=PEER_WATCH_GONE
                )
            except (*RETRYABLE, NatsError) as exc:
                # The server is away (the connection reconnects) or the bucket is not ready.
                logger.info("cannot watch the peer board yet: %r", exc)
                await asyncio.sleep(1.0)
                continue
            try:
                still_wanted()
                await _pump(watcher, handler)
            finally:
                with contextlib.suppress(*RETRYABLE, BadSubscriptionError):
                    await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py: untyped


async def _pump(watcher: KeyValue.KeyWatcher, handler: PeerHandler) -> None:
    while True:
        still_wanted()
        entry = await _next_entry(watcher, PEER_WATCH_IDLE)
        if entry is _QUIET:
            logger.info("the peer board went quiet; watching it afresh")
            return
        if entry is None:  # the end of the current entries
            continue
        gone = entry.operation in ("DEL", "PURGE") or entry.value is None
        await handler(entry.key, None if gone else entry.value)
