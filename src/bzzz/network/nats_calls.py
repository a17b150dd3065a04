"""Calls to NATS that a server away or a leader not yet elected may fail for a moment."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.errors import ConnectionClosedError, NoRespondersError
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from bzzz.errors import NetworkError

T = TypeVar("T")

# What a call is made again for: the server is away, reconnecting, or electing a leader.
RETRYABLE = (
    asyncio.TimeoutError,
    NatsTimeoutError,
    NoRespondersError,
    NoStreamResponseError,
    ServiceUnavailableError,
    ConnectionClosedError,
)


async def retried(failure: str, call: Callable[[], Awaitable[T]], within: float) -> T:
    """``call``, made again on a retryable error until ``within`` seconds have passed;
    NetworkError (``failure``, then why) when it does not succeed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    delay = 0.05
    while True:
        try:
            return await call()
        except RETRYABLE as exc:
            if loop.time() + delay >= deadline:
                raise NetworkError(f"{failure} ({exc!r})") from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        except NatsError as exc:
            raise NetworkError(f"{failure} ({exc!r})") from exc
