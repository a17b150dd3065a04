"""Rate limits as token buckets: per node and per agent, refusing with RATE_LIMITED."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from bzzz.errors import RateLimited

MAX_TRACKED = 100_000


class TokenBucket:
    """``rate`` tokens a second, holding at most ``capacity``; takes one per call."""

    __slots__ = ("_at", "_level", "capacity", "rate")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = max(capacity, 1.0)
        self._level = self.capacity
        self._at = now

    def wait_for_one(self, now: float) -> float:
        """0 when a token was taken; otherwise the seconds until one is there (none taken)."""
        self._level = min(self.capacity, self._level + (now - self._at) * self.rate)
        self._at = now
        if self._level >= 1:
            self._level -= 1
            return 0.0
        return (1 - self._level) / self.rate


class PostLimiter:
    """The node's and each agent's message rate (0: no limit)."""

    def __init__(
        self,
        node_rate: float,
        agent_rate: float,
        burst_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._burst = burst_seconds
        self._agent_rate = agent_rate
        self._node = (
            TokenBucket(node_rate, node_rate * burst_seconds, clock()) if node_rate else None
        )
        self._agents: OrderedDict[str, TokenBucket] = OrderedDict()

    def take(self, agent_id: str) -> None:
        """Count one message by ``agent_id``; RATE_LIMITED (nothing taken) when over a limit."""
        if self._node is None and not self._agent_rate:
            return
        now = self._clock()
        bucket = self._agent_bucket(agent_id, now)
        if bucket is not None:
            self._refuse(bucket.wait_for_one(now), "agent")
        if self._node is not None:
            # A message the node refuses still spent its agent's token: retrying at once
            # cannot drain the node's bucket through many agents faster.
            self._refuse(self._node.wait_for_one(now), "node")

    def _agent_bucket(self, agent_id: str, now: float) -> TokenBucket | None:
        if not self._agent_rate:
            return None
        bucket = self._agents.get(agent_id)
        if bucket is None:
            rate = self._agent_rate
            bucket = self._agents[agent_id] = TokenBucket(rate, rate * self._burst, now)
            if len(self._agents) > MAX_TRACKED:
                self._agents.popitem(last=False)
        else:
            self._agents.move_to_end(agent_id)
        return bucket

    @staticmethod
    def _refuse(wait: float, which: str) -> None:
        if wait <= 0:
            return
        retry = round(wait, 3)
        raise RateLimited(
            f"the {which} message rate limit is reached; retry in {retry} s",
            details={"limit": f"{which}_messages_per_second", "retry_after": retry},
        )


class CallLimiter:
    """An expensive call's rate per principal: ``per_minute`` calls a minute, ``burst`` at
    once (0 a minute: no limit); past it RATE_LIMITED with ``retry_after``."""

    def __init__(
        self,
        limit: str,
        per_minute: float,
        burst: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._rate = per_minute / 60.0
        self._burst = burst
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def take(self, principal: str) -> None:
        """Count one call by ``principal``; RATE_LIMITED (nothing taken) past its rate."""
        if not self._rate:
            return
        now = self._clock()
        bucket = self._buckets.get(principal)
        if bucket is None:
            bucket = self._buckets[principal] = TokenBucket(self._rate, self._burst, now)
            if len(self._buckets) > MAX_TRACKED:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(principal)
        wait = bucket.wait_for_one(now)
        if wait > 0:
            retry = round(wait, 3)
            raise RateLimited(
                f"the {self._limit} rate limit is reached; retry in {retry} s",
                details={"limit": self._limit, "retry_after": retry},
            )
