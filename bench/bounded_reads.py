"""Issue 32: what reading a huge untrusted body costs in peak memory, bounded and unbounded.

Three readers, each handed a body of ``--mib`` MiB (default 300) that its sender makes as it
sends it (never held whole):

- ``card``: ``bzzz.a2a.cards.fetch_card`` through the bridge's guarded client, from a loopback
  HTTP server, with the body's Content-Length and without one (read to the close); bounded at
  ``a2a.max_card_bytes`` (256 KiB), and unbounded (a limit of 1 TiB: how the code read before);
- ``snapshot``: ``JetStreamSnapshots.get`` of an object put with raw nats-py under the
  snapshots bucket's name (embedded nats-server in a temporary directory), bounded at
  ``snapshots.max_bytes`` (256 MiB: refused from the metadata) and at 1 TiB (read a chunk at a
  time), beside nats-py's own ``ObjectStore.get`` into a buffer (how the code read before).

Each figure is the rise of this process's peak resident memory (VmHWM, reset through
/proc/self/clear_refs before each read) over the memory in use then, in MiB.

    .venv/bin/python bench/bounded_reads.py [--mib 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.js.api import ObjectMeta, ObjectMetaOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import code_version, machine, report
from bzzz.a2a.cards import fetch_card
from bzzz.a2a.guard import guarded_client
from bzzz.events.targets import TargetPolicy
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.snapshots import JetStreamSnapshots, snapshot_bucket

MIB = 1 << 20
UNBOUNDED = 1 << 40
_PIECE = b"a" * MIB


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> int:
    """Reset VmHWM to the memory in use now; that memory."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status("VmRSS")


async def peak_rise(read: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Run ``read`` with the peak reset first: its rise (MiB), seconds, and how it ended."""
    before = _reset_peak()
    began = time.perf_counter()
    try:
        await read()
        ended = "read"
    except Exception as exc:  # the refusal is the figure's other half: show what it was
        ended = f"{type(exc).__name__}: {str(exc)[:120]}"
    return {
        "peak_rise_mib": round((_status("VmHWM") - before) / MIB, 1),
        "seconds": round(time.perf_counter() - began, 2),
        "ended": ended,
    }


@contextlib.asynccontextmanager
async def body_server(size: int, declared: bool) -> AsyncIterator[str]:
    """A loopback HTTP server answering ``size`` bytes to every request, made as it is sent."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            if declared:
                head += f"Content-Length: {size}\r\n"
            writer.write(head.encode() + b"\r\n")
            for _ in range(size // MIB):
                writer.write(_PIECE)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def cards(size: int) -> dict[str, Any]:
    """fetch_card of a huge body, bounded and not, with and without its Content-Length."""
    policy = TargetPolicy(allow_private=False, loopback_only=True)
    found: dict[str, Any] = {}
    for declared in (True, False):
        for limit, label in ((256 * 1024, "bounded"), (UNBOUNDED, "unbounded")):
            async with (
                body_server(size, declared) as url,
                guarded_client(policy, 120, max_bytes=limit) as http,
            ):
                key = f"{label}, {'content-length' if declared else 'read to close'}"
                found[key] = await peak_rise(lambda: fetch_card(http, url))
    return found


class _Made(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = b"x" * count
        self.left -= count
        return count


async def snapshots(size: int) -> dict[str, Any]:
    """A huge object under the snapshots bucket: the reader's get, bounded and not; nats-py's."""
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as where:
        server = EmbeddedNats(Path(where), max_file_store=4 << 30)
        await server.start()
        nc = await nats.connect(server.client_url)
        try:
            store = await nc.jetstream(timeout=60).create_object_store(snapshot_bucket("main"))
            meta = ObjectMeta(
                name="snapshot.*", options=ObjectMetaOptions(max_chunk_size=128 << 10)
            )
            began = time.perf_counter()
            await store.put("snapshot.*", io.BufferedReader(_Made(size), 128 << 10), meta=meta)
            found["put_seconds"] = round(time.perf_counter() - began, 2)
            ours = JetStreamSnapshots(nc, "main")
            found["bounded (256 MiB)"] = await peak_rise(lambda: ours.get("snapshot.*", 256 * MIB))
            found["unbounded, chunk by chunk"] = await peak_rise(
                lambda: ours.get("snapshot.*", UNBOUNDED)
            )
            found["nats-py ObjectStore.get into a buffer"] = await peak_rise(
                lambda: store.get("snapshot.*", writeinto=io.BytesIO())
            )
        finally:
            await nc.close()
            await server.close()
    return found


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=300, help="the body's size (MiB)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    size = args.mib * MIB
    results = {
        "bench": "bounded_reads",
        "mib": args.mib,
        "machine": machine(),
        "code": code_version(),
        "card": await cards(size),
        "snapshot": await snapshots(size),
    }
    report(results, args.json)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
