"""Bootstrap of a new node from a snapshot vs a full replay of the log (issue 22).

A log of ``--envelopes`` signed posts of one project (``p1``) goes straight onto the stream
of an embedded nats-server, sealed by an admitted node. That node (serving ``p1``) catches up
and writes its snapshot to the object store; ``--after`` more posts follow. Then two brand-new
``p1`` nodes start on the log, one after the other: one from the snapshot (it replays only what
came after), one replaying everything (``snapshots.load`` off). Figures: the time each took to
start and catch up, envelopes applied, the snapshot's size and the time to write it.

    .venv/bin/python bench/snapshot.py [--envelopes 100000] [--after 1000] [--json out]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from bzzz.config import load_settings
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import stream_name
from bzzz.network.sealing import encode_secret, new_secret
from bzzz.node.core import Node
from bzzz.principal import LOCAL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import code_version, machine, posted_payload, report

# Posts in flight at once while the log is filled.
WINDOW = 4000
# The network's data key, shared by the bench's nodes as an operator shares it.
NETWORK_KEY = encode_secret(new_secret())


def _settings(data_dir: Path, url: str, *, load: bool = True) -> Any:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(data_dir)},
            "bzzz": {
                "nats_url": [url],
                "heartbeat_interval": 30.0,
                "projects": ["p1"],
                # A million posts take more than the default 1 GB of the embedded server.
                "max_file_store": 8 << 30,
            },
            "snapshots": {"every": 0, "load": load},
            "encryption": {"key": NETWORK_KEY},
        },
    )


def _post(writer: NodeIdentity, n: int) -> tuple[str, bytes, str]:
    sender = f"source-{n % 50}"
    content = {"n": n, "text": f"post number {n} of the bench"}
    payload = posted_payload(f"msg-bench-{n:08d}", sender, "sink", "bzzz://sink", content)
    subject = f"bzzz.main.p.p1.msg.{sender}"
    env = seal(writer, "main", "message.posted", subject, payload)
    return subject, env.to_bytes(), env.id


async def _fill(url: str, writer: NodeIdentity, first: int, count: int) -> int:
    """Publish ``count`` posts, WINDOW at a time in flight (each publish waits for its ack)."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    for start in range(first, first + count, WINDOW):
        posts = [_post(writer, n) for n in range(start, min(start + WINDOW, first + count))]
        await asyncio.gather(
            *(js.publish(s, data, headers={"Nats-Msg-Id": i}) for s, data, i in posts)
        )
    total = int((await js.stream_info(stream_name("main"))).state.messages)
    await nc.close()
    return total


async def _bootstrap(work: Path, url: str, name: str, *, load: bool) -> dict[str, Any]:
    started = time.perf_counter()
    settings = _settings(work / name, url, load=load)
    async with Node(settings, catch_up_timeout=3600) as node:
        elapsed = time.perf_counter() - started
        shown = node.snapshots.started()
        loaded = node.snapshots.loaded
    return {"start_and_catch_up_s": round(elapsed, 3), **shown, "loaded": loaded}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-snap-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "server") as server:
            url = server.client_url
            # The first node creates the stream and admits itself: its key signs the log.
            async with Node(_settings(work / "writer", url)):
                pass
            writer = NodeIdentity.load_or_create(work / "writer")
            await _fill(url, writer, 0, args.envelopes)
            async with Node(_settings(work / "writer", url), catch_up_timeout=3600) as source:
                began = time.perf_counter()
                written = await source.snapshots.write(LOCAL)
                write_s = time.perf_counter() - began
            total = await _fill(url, writer, args.envelopes, args.after)
            from_snapshot = await _bootstrap(work, url, "from-snapshot", load=True)
            replay = await _bootstrap(work, url, "replay", load=False)
    return {
        "bench": "snapshot",
        "envelopes_in_log": total,
        "snapshot": {
            "sequence": written["sequence"],
            "rows": written["rows"],
            "bytes": written["bytes"],
            "write_s": round(write_s, 3),
        },
        "from_snapshot": from_snapshot,
        "full_replay": replay,
        "speedup": round(replay["start_and_catch_up_s"] / from_snapshot["start_and_catch_up_s"], 2),
        "machine": machine(),
        "code": code_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envelopes", type=int, default=100_000)
    parser.add_argument("--after", type=int, default=1_000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
