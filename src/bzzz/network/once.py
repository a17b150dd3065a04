"""Used once across the network: a forwarded request's id is claimed by the first node to run it.

A forwarded request is answered by one member of a queue group, and a holder of the NATS login
who captured it can publish it again: nats-server hands the copy to any member, maybe one that
never saw the id. So the id is claimed network-wide before the call runs: a create-only key in
a JetStream key-value bucket (``kv.create`` fails when the key is there), kept ``ttl`` seconds
(the bucket's ``max_age``). The ttl outlives the window a request's timestamp is accepted in
(either way of the landing node's clock), so a copy inside the window finds the key and one
after it is stale.

:class:`JetStreamOnce` is that bucket (in memory on the servers, replicated as the log is);
:class:`InMemoryOnce` serves the in-memory bus (the nodes of one test share it) and unit tests.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from bzzz.errors import NetworkError

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js.kv import KeyValue

logger = logging.getLogger(__name__)

# At most this many ids are held in memory (the oldest are let go first).
REMEMBERED = 100_000
# A claim the servers did not answer (a timeout under load, a bucket being created by another
# node at the same moment) is tried this many times before the caller refuses the work.
CLAIM_ATTEMPTS = 3


def once_bucket(network: str) -> str:
    """The KV bucket that holds a network's used request ids."""
    return f"bzzz_once_{network}"


class UsedOnce(Protocol):
    """Claims of ids, each granted once across the network within its ttl."""

    async def claim(self, key: str) -> bool:
        """True for the first claim of ``key``; False when it was claimed before.

        NetworkError when the claim could not be recorded (the caller refuses the work).
        """
        ...


class InMemoryOnce:
    """Claims held in this process: an id is granted once until ``ttl`` seconds passed."""

    def __init__(
        self,
        ttl: float,
        *,
        remembered: int = REMEMBERED,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._remembered = remembered
        self._now = now
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    async def claim(self, key: str) -> bool:
        """True the first time ``key`` is claimed within the ttl."""
        now = self._now()
        while self._seen:
            oldest, at = next(iter(self._seen.items()))
            if now - at < self._ttl and len(self._seen) < self._remembered:
                break
            del self._seen[oldest]
        if key in self._seen:
            return False
        self._seen[key] = now
        return True


class JetStreamOnce:
    """Claims as create-only keys of a JetStream KV bucket whose entries live ``ttl`` seconds."""

    def __init__(
        self,
        nc: NatsClient,
        network: str,
        ttl: float,
        *,
        replicas: int = 1,
        timeout: float = 5.0,
    ) -> None:
        self._js = nc.jetstream(timeout=timeout)
        self.bucket = once_bucket(network)
        self._ttl = ttl
        self._replicas = replicas
        self._kv: KeyValue | None = None
        self._binding = asyncio.Lock()

    async def _bound(self) -> KeyValue:
        from nats.js.api import KeyValueConfig, StorageType
        from nats.js.errors import BadRequestError, BucketNotFoundError

        async with self._binding:
            if self._kv is None:
                try:
                    self._kv = await self._js.key_value(self.bucket)
                except BucketNotFoundError:
                    config = KeyValueConfig(
                        bucket=self.bucket,
                        history=1,
                        ttl=self._ttl,
                        # In memory: an id is worth keeping for a minute, never a disk write.
                        storage=StorageType.MEMORY,
                        replicas=self._replicas,
                    )
                    try:
                        self._kv = await self._js.create_key_value(config)
                    except BadRequestError:
                        # Another node created it between the look and the create.
                        self._kv = await self._js.key_value(self.bucket)
            return self._kv

    async def claim(self, key: str) -> bool:
        """True when this call created ``key``; False when it was there already.

        The value is a token of this claim, so a claim tried again after an answer that never
        came (stored, or not) tells its own key from another's.
        """
        token = secrets.token_hex(8).encode()
        failure: BaseException | None = None
        for attempt in range(CLAIM_ATTEMPTS):
            try:
                return await self._claim_once(key, token, retried=attempt > 0)
            except Exception as exc:  # nats-py raises many kinds; each means "not recorded"
                failure = exc
                logger.warning("claiming request id %s failed (try %d): %r", key, attempt + 1, exc)
                await asyncio.sleep(0.05 * (attempt + 1))
        raise NetworkError(f"the network did not record request id {key!r} ({failure!r})")

    async def _claim_once(self, key: str, token: bytes, *, retried: bool) -> bool:
        from nats.js.errors import KeyWrongLastSequenceError

        kv = await self._bound()
        try:
            await kv.create(key, token)
        except KeyWrongLastSequenceError:
            if not retried:
                return False
            held = await kv.get(key)
            return held.value == token
        return True
