"""MCP over stdin/stdout that reads any stdin to its end and answers everything it read.

stdin may be a pipe, a socket, a regular file, ``/dev/null`` or a terminal. Pipes and sockets
are read on the event loop (cancellable, so SIGTERM stops the node while a client holds stdin
open); anything else is read by a daemon thread, which the event loop cannot watch but which
never keeps the process alive. At end of input the line iterator does not end until every
request read has been answered on stdout, so ``printf '<requests>' | bzzz serve --stdio`` gets
every answer before the node stops. Only JSON-RPC goes to stdout: while serving, file
descriptor 1 points at stderr and the transport writes to a private duplicate of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import threading
from collections.abc import AsyncIterator, Iterator
from typing import BinaryIO

from mcp_types import JSONRPCNotification, JSONRPCRequest, jsonrpc_message_adapter

# Requests answered only when the client goes away: waiting for them at EOF would never end.
_OPEN_ENDED = frozenset({"subscriptions/listen"})
_CANCELLED = "notifications/cancelled"
# After end of input, the longest the node waits for its answers (a post retries for
# bzzz.publish_timeout, 10 s by default) before it stops anyway.
DRAIN_TIMEOUT = 120.0

logger = logging.getLogger(__name__)


class Pending:
    """Ids of requests read from stdin and not yet answered on stdout.

    A line counts as a request only if the SDK will read it as one (what it cannot read it
    never answers); a request the client cancels gets no answer either, so it stops counting.
    """

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._empty = asyncio.Event()
        self._empty.set()

    def read(self, line: str) -> None:
        """Note a request (or a cancellation) read from stdin."""
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            return
        if isinstance(message, JSONRPCRequest) and message.method not in _OPEN_ENDED:
            self._ids.add(json.dumps(message.id))
            self._empty.clear()
        elif isinstance(message, JSONRPCNotification) and message.method == _CANCELLED:
            params = message.params or {}
            self._answered(json.dumps(params.get("requestId")))

    def written(self, line: str) -> None:
        """Note a message written to stdout (a response clears its request)."""
        key = _response_key(line)
        if key is not None:
            self._answered(key)

    def _answered(self, key: str) -> None:
        self._ids.discard(key)
        if not self._ids:
            self._empty.set()

    async def drained(self, within: float = DRAIN_TIMEOUT) -> None:
        """Return once every request read so far has been answered (or ``within`` passed)."""
        try:
            async with asyncio.timeout(within):
                await self._empty.wait()
        except TimeoutError:
            logger.warning(
                "stdin ended; %d requests still unanswered after %.0f s: stopping",
                len(self._ids),
                within,
            )


def _response_key(line: str) -> str | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "id" not in message or "method" in message:
        return None
    return json.dumps(message["id"])


class StdinLines:
    """stdin as an async iterator of lines that ends once EOF is read and all is answered."""

    def __init__(self, source: AsyncIterator[bytes], pending: Pending) -> None:
        self._source = source
        self._pending = pending

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        async for raw in self._source:
            line = raw.decode("utf-8", "replace")
            self._pending.read(line)
            return line
        await self._pending.drained()
        raise StopAsyncIteration


async def _pipe_lines(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while line := await reader.readline():
        yield line


async def _thread_lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def pump() -> None:
        # A daemon thread: a terminal read that never returns does not hold the exit.
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            for line in iter(stream.readline, b""):
                loop.call_soon_threadsafe(queue.put_nowait, line)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, b"")

    threading.Thread(target=pump, name="bzzz-stdin", daemon=True).start()
    while line := await queue.get():
        yield line


async def stdin_source() -> AsyncIterator[bytes]:
    """The raw lines of stdin, read on the loop when it can watch the descriptor."""
    fd = os.dup(0)
    mode = os.fstat(fd).st_mode
    stream = os.fdopen(fd, "rb", buffering=0 if _watchable(mode) else -1)
    if _watchable(mode):
        reader = asyncio.StreamReader(limit=1 << 24)
        await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), stream
        )
        return _pipe_lines(reader)
    return _thread_lines(stream)


def _watchable(mode: int) -> bool:
    # Regular files and character devices (/dev/null, a terminal) cannot be watched by
    # every loop (uvloop aborts on them): they are read by a thread.
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class StdoutWriter:
    """The transport's stdout: a private duplicate of fd 1, told which requests it answers."""

    def __init__(self, fd: int, pending: Pending) -> None:
        self._fd = fd
        self._pending = pending

    async def write(self, text: str) -> None:
        """Write one JSON-RPC line (the SDK writes a message and its newline in one call)."""
        # A thread: a client slow to read must not stall the event loop. The SDK awaits each
        # write before the next, so the order holds.
        await asyncio.to_thread(self._write_all, text.encode("utf-8"))
        self._pending.written(text)

    def _write_all(self, data: bytes) -> None:
        while data:
            data = data[os.write(self._fd, data) :]

    async def flush(self) -> None:
        """Nothing is buffered."""


@contextlib.contextmanager
def claimed_stdout() -> Iterator[int]:
    """A private duplicate of fd 1 for JSON-RPC, with fd 1 itself pointed at stderr."""
    private = os.dup(1)
    os.dup2(2, 1)
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            os.dup2(private, 1)
        os.close(private)
