"""The cost of a retention run, and of a new node's catch-up after one.

One nats-server (the embedded default's configuration), a node on SQLite with a manual clock:
``--posts`` notes posted ten days ago (plus a task assignment every 10th post), then the node
runs retention with ``messages_days = 5``. Figures: the run's seconds (plan, stand-ins, the
envelope every node applies, the purge, VACUUM), envelopes purged and re-stated, the SQLite
file before and after; then a brand-new node's catch-up time over the purged log (it applies
the stand-ins in the purged posts' places) against a new node's catch-up before the run.

    .venv/bin/python bench/retention.py [--posts 5000] [--json bench/results/retention.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bzzz.clock import ManualClock
from bzzz.config import Settings, load_settings
from bzzz.domain import utcnow
from bzzz.eventlog import Caller
from bzzz.network.embedded import EmbeddedNats
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import AnnounceInput, PostInput

CALLER = Caller("bench", LOCAL)


def _settings(root: Path, name: str, url: str, **retention: float) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(root / name)},
            "bzzz": {"nats_url": [url]},
            "retention": dict(retention),
            "conversation": {"default_timeout": 365 * 86_400},
        },
    )


async def _catch_up(root: Path, name: str, url: str) -> float:
    started = time.perf_counter()
    async with Node(_settings(root, name, url)):
        return time.perf_counter() - started


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.iterdir() if p.name.startswith("bzzz.db"))


async def _post(node: Node, posts: int) -> None:
    post = node.conversations.post
    for n in range(posts):
        if n % 10 == 0:
            content: dict[str, Any] = {"task_type": "code_review", "description": f"t{n}"}
            await post(
                CALLER,
                PostInput(
                    target_address="bzzz://b", message_type="task_assignment", content=content
                ),
            )
        else:
            text = {"text": f"note {n} " + "x" * 200}
            await post(
                CALLER, PostInput(target_address="bzzz://b", message_type="note", content=text)
            )


async def main(posts: int) -> dict[str, Any]:
    """Run the benchmark; the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = EmbeddedNats(root / "nats")
        url = await server.start()
        try:
            url = server.client_url
            clock = ManualClock(utcnow() - timedelta(days=10))
            settings = _settings(root, "a", url, messages_days=5.0)
            async with Node(settings, clock=clock) as a:
                await a.agents.announce(CALLER, AnnounceInput(agent_id="a", role="architect"))
                await a.agents.announce(
                    Caller("bench-b", LOCAL),
                    AnnounceInput(agent_id="b", role="reviewer", max_tasks=1000),
                )
                await _post(a, posts)
                clock.advance(10 * 86_400)
                before_size = _size(root / "a")
                catch_up_before = await _catch_up(root, "c0", url)
                started = time.perf_counter()
                result = await a.retention.run(LOCAL)
                run_seconds = time.perf_counter() - started
                after_size = _size(root / "a")
            catch_up_after = await _catch_up(root, "c1", url)
        finally:
            await server.close()
    return {
        "posts": posts,
        "run_seconds": round(run_seconds, 3),
        "purged": result["stream"]["removed"],
        "restated": result["stream"]["restated"],
        "tombstoned": result["store"]["messages"],
        "sqlite_bytes_before": before_size,
        "sqlite_bytes_after": after_size,
        "new_node_catch_up_seconds_before_run": round(catch_up_before, 3),
        "new_node_catch_up_seconds_after_run": round(catch_up_after, 3),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=5000)
    parser.add_argument("--json", type=Path, default=Path("bench/results/retention.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    figures = asyncio.run(main(args.posts))
    for key, value in figures.items():
        print(f"{key:40} {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
