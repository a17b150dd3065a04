"""uvicorn's HTTP protocol, bounded: one client's idle sockets cannot take the node down.

* A socket that sends no complete request head within ``header_timeout`` (of connecting, or
  of a request's first byte) is closed: uvicorn arms its keep-alive timer only after a
  response, so such a socket would stay open for ever.
* Every connection is registered with a :class:`ConnectionGuard`. Near the process's
  file-descriptor limit it closes the oldest idle connections (no request being served), so
  a fresh client is still accepted and answered while another holds thousands of sockets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

logger = logging.getLogger(__name__)


class ConnectionGuard:
    """The open HTTP connections, oldest first; past ``capacity`` the oldest idle ones close.

    ``capacity`` leaves room under the file-descriptor limit for everything else the process
    opens (the store, NATS, webhooks); ``batch`` connections close at once, so a flood costs
    one scan per ``batch`` new connections rather than one per connection.
    """

    def __init__(self, capacity: int, batch: int = 32) -> None:
        self.capacity = max(1, capacity)
        self.batch = max(1, min(batch, self.capacity // 4 or 1))
        self._open: dict[BoundedHttpProtocol, None] = {}
        self.shed = 0

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, connection: BoundedHttpProtocol) -> None:
        """A connection was accepted; make room if the process nears its limit."""
        self._open[connection] = None
        if len(self._open) > self.capacity:
            self._shed()

    def closed(self, connection: BoundedHttpProtocol) -> None:
        """A connection ended."""
        self._open.pop(connection, None)

    def _shed(self) -> None:
        target = len(self._open) - self.capacity + self.batch
        idle = [c for c in self._open if c.idle][:target]
        for connection in idle:
            self._open.pop(connection, None)
            connection.close()
        self.shed += len(idle)
        logger.warning(
            "%d HTTP connections open, near the open-file limit: closed the %d oldest idle",
            len(self._open) + len(idle),
            len(idle),
        )


class BoundedHttpProtocol(HttpToolsProtocol):
    """Closes a connection whose request head has not arrived within ``header_timeout``; tells
    ``guard`` of each connection."""

    header_timeout: float = 10.0
    guard: ConnectionGuard | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    @property
    def idle(self) -> bool:
        """No request being served or queued: closing loses no one's answer."""
        serving = self.cycle is not None and not self.cycle.response_complete
        return not serving and not self.pipeline

    def close(self) -> None:
        """Close the connection (the guard's choice)."""
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start counting: the request head must arrive before the timeout."""
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)
        if self.guard is not None:
            self.guard.opened(self)

    def on_message_begin(self) -> None:
        """A new request begins (on a kept-alive connection too): its head has the same time."""
        super().on_message_begin()
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def on_headers_complete(self) -> None:
        """The head arrived: the request runs under the usual rules."""
        self._cancel_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the timer and the connection."""
        self._cancel_head_timer()
        if self.guard is not None:
            self.guard.closed(self)
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        self.close()


def bounded_protocol(
    header_timeout: float, guard: ConnectionGuard | None = None
) -> type[BoundedHttpProtocol]:
    """The protocol class with its header timeout and connection guard."""
    return type(
        "BoundedHttpProtocol",
        (BoundedHttpProtocol,),
        {"header_timeout": header_timeout, "guard": guard},
    )
