"""Catch-up of a node serving one project vs a node serving every project (issue 22).

A log of ``--envelopes`` signed posts (``--kind agents``: agent announcements, each a new agent)
spread evenly over ``--projects`` projects (so ``p1`` is 1/``projects`` of it) goes straight
onto the stream of an embedded nats-server, sealed by an admitted node. Then a brand-new ``*``
node and a brand-new ``p1`` node start on it, one after the other, each until it has applied
what it consumes. The figure: log envelopes per second of
catch-up (the log's size over the time to start and catch up), for each.

    .venv/bin/python bench/partition_catchup.py [--envelopes 50000] [--projects 10]
                                                [--kind posts|agents] [--json out]
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
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import stream_name
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import code_version, machine, posted_payload, report

ROLES = ("architect", "reviewer", "developer", "tester", "documentation")


def _settings(data_dir: Path, url: str, projects: list[str]) -> Any:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(data_dir)},
            "bzzz": {"nats_url": [url], "heartbeat_interval": 2.0, "projects": projects},
        },
    )


def _post(writer: NodeIdentity, n: int, project: str) -> tuple[str, Envelope]:
    sender = f"source-{project}"
    address = f"bzzz://sink-{project}"
    payload = posted_payload(f"msg-bench-{n:08d}", sender, f"sink-{project}", address, {"n": n})
    subject = f"bzzz.main.p.{project}.msg.{sender}"
    return subject, seal(writer, "main", "message.posted", subject, payload)


def _agent(writer: NodeIdentity, n: int, project: str) -> tuple[str, Envelope]:
    announced = AnnounceInput(
        agent_id=f"agent-{n:08d}",
        role=ROLES[n % len(ROLES)],
        capabilities=[f"cap-{n % 13}", f"cap-{n % 7 + 13}"],
        max_tasks=1 + n % 5,
        project=project,
    )
    payload = announced.model_dump() | {"session_id": "bench-session", "metadata": {"bulk": 1}}
    subject = f"bzzz.main.p.{project}.agent.{payload['agent_id']}"
    return subject, seal(writer, "main", "agent.announced", subject, payload)


async def _fill(url: str, writer: NodeIdentity, count: int, projects: int, kind: str) -> int:
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    make = _agent if kind == "agents" else _post
    for n in range(count):
        subject, env = make(writer, n, f"p{n % projects + 1}")
        await js.publish_async(subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id})
        if n % 5000 == 4999:
            await js.publish_async_completed()
    await js.publish_async_completed()
    total = int((await js.stream_info(stream_name("main"))).state.messages)
    await nc.close()
    return total


async def _catch_up(work: Path, url: str, name: str, projects: list[str], total: int) -> dict:
    started = time.perf_counter()
    async with Node(_settings(work / name, url, projects), catch_up_timeout=3600) as node:
        elapsed = time.perf_counter() - started
        applied = node.projector.applied_count
    return {
        "projects": projects,
        "start_and_catch_up_s": round(elapsed, 3),
        "envelopes_applied": applied,
        "log_envelopes_per_s": round(total / elapsed, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-part-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "server") as server:
            url = server.client_url
            # The first node creates the stream and admits itself: its key signs the log.
            async with Node(_settings(work / "writer", url, ["*"])):
                pass
            writer = NodeIdentity.load_or_create(work / "writer")
            total = await _fill(url, writer, args.envelopes, args.projects, args.kind)
            every = await _catch_up(work, url, "every", ["*"], total)
            one = await _catch_up(work, url, "one", ["p1"], total)
    return {
        "bench": "partition_catchup",
        "kind": args.kind,
        "envelopes_in_log": total,
        "projects": args.projects,
        "every": every,
        "p1_only": one,
        "speedup": round(every["start_and_catch_up_s"] / one["start_and_catch_up_s"], 2),
        "machine": machine(),
        "code": code_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envelopes", type=int, default=50_000)
    parser.add_argument("--projects", type=int, default=10)
    parser.add_argument("--kind", choices=("posts", "agents"), default="posts")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
