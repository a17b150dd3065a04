"""An HTTP server on loopback that answers every request with a huge body, made as it is sent.

The body (``size`` bytes of one JSON string, never held whole: it is written a MiB at a time,
each write waiting for the socket) comes with its ``Content-Length`` or without one (read to
the close), so a reader is tried on both ways of learning a body's size. ``peak_growth``
measures what a block of code adds to this process's peak memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1 << 20
_PIECE = b"a" * MIB
_HEAD = b'{"jsonrpc": "2.0", "id": "1", "result": {"message": {"parts": [{"text": "'


@dataclass
class Big:
    """A served huge answer: its URL, and how many requests and body bytes went out."""

    url: str
    requests: int = 0
    sent: int = 0
    paths: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def big_server(size: int, *, declared: bool, body: bytes | None = None) -> AsyncIterator[Big]:
    """A loopback server answering ``size`` bytes (``declared``: with its Content-Length);
    or, given ``body``, answering that (a small card, say)."""
    big = Big("")
    start = _HEAD if body is None else body
    size = size if body is None else len(body)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            big.requests += 1
            big.paths.append(lines[0].split(" ")[1])
            length = next(
                (
                    int(v)
                    for k, _, v in (x.partition(":") for x in lines)
                    if k.lower() == "content-length"
                ),
                0,
            )
            await reader.readexactly(length)
            headers = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            if declared:
                headers += f"Content-Length: {size}\r\n"
            writer.write(headers.encode() + b"\r\n" + start)
            left = size - len(start)
            while left > 0:
                piece = _PIECE[: min(MIB, left)]
                writer.write(piece)
                await writer.drain()
                big.sent += len(piece)
                left -= len(piece)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the reader stopped reading: what a bounded reader does
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    big.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield big
    finally:
        server.close()
        await server.wait_closed()


def _status(key: str) -> int:
    """A /proc/self/status figure, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/self/status")


@dataclass
class Peak:
    """How much a block of code raised this process's peak resident memory (bytes)."""

    growth: int = 0


@contextlib.contextmanager
def peak_growth() -> Iterator[Peak]:
    """Reset the peak (VmHWM) to the memory in use now, run the block, measure the rise."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    peak = Peak()
    try:
        yield peak
    finally:
        peak.growth = _status("VmHWM") - before
