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
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from bzzz.errors import NetworkError

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js.kv import KeyValue

# At most this many ids are held in memory (the oldest are let go first).
REMEMBERED = 100_000


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
        from nats.js.errors import BucketNotFoundError

        async with self._binding:
            if self._kv is None:
                try:
                    self._kv = await self._js.key_value(self.bucket)
                except BucketNotFoundError:
                    # In memory: an id is worth keeping for a minute, never worth a disk write.
                    self._kv = await self._js.create_key_value(
                        KeyValueConfig(
                            bucket=self.bucket,
                            history=1,
                            ttl=self._ttl,
                            storage=StorageType.MEMORY,
                            replicas=self._replicas,
                        )
                    )
            return self._kv

    async def claim(self, key: str) -> bool:
        """True when this call created ``key``; False when it was there already."""
        from nats.js.errors import KeyWrongLastSequenceError

        try:
            kv = await self._bound()
            await kv.create(key, b"1")
        except KeyWrongLastSequenceError:
            return False
        except Exception as exc:  # nats-py raises many kinds; all mean "not recorded"
            raise NetworkError(f"the network did not record request id {key!r} ({exc!r})") from exc
        return True
