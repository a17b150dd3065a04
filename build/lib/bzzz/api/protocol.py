"""uvicorn's HTTP protocol with a header timeout: a socket that sends no request is closed.

uvicorn arms its keep-alive timer only after a response, so a connection that never sends a
complete request head stays open for ever and counts against ``limit_concurrency``: a thousand
idle sockets would make the node unreachable.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """Closes a connection whose request head has not arrived within ``header_timeout``."""

    header_timeout: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start counting: the request head must arrive before the timeout."""
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def on_headers_complete(self) -> None:
        """The head arrived: the request runs under the usual rules."""
        self._cancel_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the timer with the connection."""
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class with ``seconds`` as its header timeout."""
    return type("BoundedHttpProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})
