"""Serving the HTTP app with uvicorn, within bounds one client cannot exhaust.

* The open-file soft limit is raised to the hard one at start (a login shell's 1,024 is
  what a thousand idle sockets reach).
* uvicorn's ``limit_concurrency`` is off: it counts every open connection, so sockets that
  sent nothing locked every client out. :class:`bzzz.api.limits.RequestLimit` bounds the
  requests served at once instead.
* Each connection must send its request head within ``limits.http_header_timeout``; near the
  open-file limit the oldest idle connections close first (:mod:`bzzz.api.protocol`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import socket

import uvicorn
from starlette.types import ASGIApp

from bzzz.api.protocol import ConnectionGuard, bounded_protocol
from bzzz.config import LimitsSettings

logger = logging.getLogger(__name__)

# The listening socket's queue of connections not yet accepted: a burst of connections waits
# there rather than being dropped (Python's default is 128).
BACKLOG = 4096
# File descriptors kept free for what is not an HTTP connection, at the least.
MIN_RESERVE = 64


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open-file limit to %d: %s", hard, exc)
    return soft


def open_files() -> int:
    """File descriptors this process holds (0 where /proc does not tell)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def connection_capacity(soft_limit: int, in_use: int) -> int:
    """How many HTTP connections fit under ``soft_limit`` beside ``in_use`` other descriptors:
    an eighth of the limit (at least MIN_RESERVE) stays free for the rest of the node."""
    reserve = max(MIN_RESERVE, soft_limit // 8)
    return max(16, soft_limit - in_use - reserve)


class _QuietServer(uvicorn.Server):
    # uvicorn re-raises the signal it caught after its own shutdown, which would kill us
    # before the node stops; the CLI owns SIGINT/SIGTERM instead.
    def capture_signals(self) -> contextlib.nullcontext[None]:  # type: ignore[override]
        return contextlib.nullcontext()


def http_server(app: ASGIApp, listener: socket.socket, limits: LimitsSettings) -> uvicorn.Server:
    """The uvicorn server of ``app`` on ``listener`` (already bound), with the node's bounds.

    Call it once the node has started: the descriptors it holds then are left room.
    """
    soft = raise_open_files_limit()
    guard = ConnectionGuard(connection_capacity(soft, open_files()))
    logger.info("open-file limit %d: at most %d HTTP connections", soft, guard.capacity)
    listener.listen(BACKLOG)
    host, port = listener.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=3,
        lifespan="on",
        timeout_keep_alive=max(1, int(limits.http_keepalive_seconds)),
        http=bounded_protocol(limits.http_header_timeout, guard),
    )
    return _QuietServer(config)
