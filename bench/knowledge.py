"""A knowledge read at 100,000 facts in one project: p50/p99 of about, q, both, for_prompt.

In-process: a real ``bzzz.node.core.Node`` (in-memory bus by default, ``--bus jetstream`` for
the embedded NATS JetStream) with SQLite in a temporary data directory. The facts are
``fact.stated`` envelopes sealed with the node's identity and network key, as
``KnowledgeService.state`` seals them, published straight to the bus many at once; the
projector verifies, opens and applies them like any other (superseding included: subjects and
relations repeat, so about a tenth of the facts supersede an earlier one), and the run waits
for it. Then, with the project's facts opened in memory once (timed: the cold load), it times
``node.knowledge.search`` for entities (``about``), words (``q``), both, and
``node.knowledge.for_prompt`` for a task's text (with the characters it adds to a prompt).

    .venv/bin/python bench/knowledge.py [--facts 100000] [--calls 300] [--bus memory|jetstream]

Prints the figures and writes bench/results/knowledge.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import code_version, machine, percentile
from bzzz.config import load_settings
from bzzz.knowledge import projection
from bzzz.knowledge.service import prompt_line
from bzzz.network import subjects
from bzzz.network.envelope import seal
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL

RESULTS = Path(__file__).resolve().parent / "results"
PROJECT = "bench"
ENTITIES = 5_000
RELATIONS = (
    "uses", "calls", "owns", "stores in", "retries with", "depends on", "is deployed on",
    "is written in", "publishes to", "reads from", "is tested by", "is reviewed by", "caches in",
    "limits", "replaces", "authenticates with", "logs to", "is owned by", "exposes", "decided",
)  # fmt: skip
AUTHORS = 50


def vocabulary(rng: random.Random, size: int = 3_000) -> list[str]:
    """Made-up words (a fixed seed: the same corpus on every run)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(words)


def entity(i: int) -> str:
    """An entity's name."""
    return f"component-{i:05d}"


def fact_payload(i: int, rng: random.Random, words: list[str]) -> dict[str, Any]:
    """``fact.stated`` payload of fact ``i`` (a fifth of the subjects among popular ones)."""
    popular = rng.random() < 0.2
    subject = entity(
        int(rng.paretovariate(1.2) * 7) % ENTITIES if popular else rng.randrange(ENTITIES)
    )
    statement = " ".join(rng.choice(words) for _ in range(rng.randint(8, 24)))
    author = f"agent-{i % AUTHORS:03d}"
    return {
        "fact_id": f"fact-bench-{i:07d}",
        "project": PROJECT,
        "subject": subject,
        "relation": rng.choice(RELATIONS),
        "object": entity(rng.randrange(ENTITIES)) if rng.random() < 0.7 else rng.choice(words),
        "statement": statement,
        "confidence": round(rng.uniform(0.5, 1.0), 2),
        "status": "agreed" if rng.random() < 0.95 else "proposed",
        "origin": "agent",
        "author": author,
        "source": {"thread": None, "message": None, "agents": [author]},
    }


def log(text: str) -> None:
    """Progress, on stderr."""
    print(text, file=sys.stderr, flush=True)


async def ingest(node: Node, facts: int, *, in_flight: int, seed: int) -> dict[str, Any]:
    """Publish the facts' envelopes (``in_flight`` at once), then wait for the projector."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    gate = asyncio.Semaphore(in_flight)
    started = time.perf_counter()
    last_seq = 0

    async def publish(payload: dict[str, Any]) -> None:
        nonlocal last_seq
        key = payload["author"]
        subject = subjects.subject(node.network, projection.KIND, key, PROJECT)
        envelope = seal(
            node.identity,
            node.network,
            projection.STATED,
            subject,
            payload,
            keyring=node.keyring,
        )
        async with gate:
            last_seq = max(
                last_seq, await node.bus.publish(subject, envelope.to_bytes(), envelope.id)
            )

    for first in range(0, facts, 2_000):
        async with asyncio.TaskGroup() as group:
            for i in range(first, min(first + 2_000, facts)):
                group.create_task(publish(fact_payload(i, rng, words)))
        if (first + 2_000) % 20_000 == 0:
            log(f"published {first + 2_000}, applied to {node.projector.applied_sequence}")
    published_s = time.perf_counter() - started
    while node.projector.applied_sequence < last_seq:
        with contextlib.suppress(TimeoutError):
            await node.projector.wait_for_sequence(last_seq, 30.0)
        log(f"applied to {node.projector.applied_sequence} of {last_seq}")
    applied_s = time.perf_counter() - started
    return {
        "facts": facts,
        "publish_seconds": round(published_s, 1),
        "applied_seconds": round(applied_s, 1),
        "facts_per_second": round(facts / applied_s, 1),
    }


async def timed(calls: list[Any]) -> dict[str, Any]:
    """p50/p99/mean/max of awaiting each call (after five unmeasured ones)."""
    for make in calls[:5]:
        await make()
    latencies: list[float] = []
    cpu: list[float] = []
    answered = 0
    for make in calls:
        t0, c0 = time.perf_counter(), time.thread_time()
        got = await make()
        latencies.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
        answered += len(got["facts"]) if isinstance(got, dict) else len(got)
    latencies.sort()
    cpu.sort()
    return {
        "calls": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 3),
        "p99_ms": round(percentile(latencies, 99), 3),
        "mean_ms": round(sum(latencies) / len(latencies), 3),
        "max_ms": round(latencies[-1], 3),
        # The event loop thread's CPU time per read: what a read costs the node, apart from
        # waiting for a core on a shared machine.
        "cpu_p50_ms": round(percentile(cpu, 50), 3),
        "cpu_p99_ms": round(percentile(cpu, 99), 3),
        "mean_answered": round(answered / len(latencies), 1),
    }


async def reads(node: Node, calls: int, seed: int) -> dict[str, Any]:
    """Time each kind of read."""
    rng = random.Random(seed + 1)
    words = vocabulary(random.Random(seed))
    search = node.knowledge.search
    started, cpu_started = time.perf_counter(), time.thread_time()
    first = await search(LOCAL, PROJECT, about=entity(0))
    cold_ms = (time.perf_counter() - started) * 1000
    cold_cpu_ms = (time.thread_time() - cpu_started) * 1000
    log(f"cold load: {cold_ms:.0f} ms ({first['total']} facts about {entity(0)})")

    def about() -> Any:
        name = entity(int(rng.paretovariate(1.2) * 7) % ENTITIES)
        return lambda: search(LOCAL, PROJECT, about=name)

    def q() -> Any:
        text = " ".join(rng.choice(words) for _ in range(3))
        return lambda: search(LOCAL, PROJECT, q=text)

    def both() -> Any:
        name = entity(int(rng.paretovariate(1.2) * 7) % ENTITIES)
        text = " ".join(rng.choice(words) for _ in range(2))
        return lambda: search(LOCAL, PROJECT, about=name, q=text, max_history=3)

    def prompt() -> Any:
        text = "Please fix " + " ".join(rng.choice(words) for _ in range(30))
        return lambda: node.knowledge.for_prompt(PROJECT, text, limit=8, max_chars=2000)

    figures = {"cold_load_ms": round(cold_ms, 1), "cold_load_cpu_ms": round(cold_cpu_ms, 1)}
    kinds = {"about": about, "q": q, "about+q": both, "for_prompt": prompt}
    measured = {name: await timed([make() for _ in range(calls)]) for name, make in kinds.items()}
    added = [sum(len(prompt_line(f)) + 1 for f in await prompt()()) for _ in range(min(calls, 100))]
    figures["prompt_added_chars_mean"] = round(sum(added) / len(added), 1)
    # ~4 characters a token for English-like text (an estimate, no tokenizer here).
    figures["prompt_added_tokens_estimate"] = round(sum(added) / len(added) / 4, 1)
    return figures | {"reads": measured}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Ingest, then read."""
    with tempfile.TemporaryDirectory(prefix="bzzz-knowledge-") as tmp:
        settings = load_settings(environ={}, overrides={"node": {"data_dir": tmp}})
        bus = InMemoryBus() if args.bus == "memory" else None
        async with Node(settings, bus=bus) as node:
            ingested = await ingest(node, args.facts, in_flight=args.in_flight, seed=args.seed)
            log(f"ingested: {ingested}")
            read = await reads(node, args.calls, args.seed)
            current = await node.knowledge.search(LOCAL, PROJECT, limit=1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "bench": "knowledge",
        "command": " ".join(sys.argv),
        "bus": args.bus,
        "ingest": ingested,
        "current_facts": current["total"],
        **read,
        "peak_rss_mb": round(peak / 1024, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": machine(),
        "code": code_version(),
    }


def parse() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--bus", choices=("memory", "jetstream"), default="memory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=RESULTS / "knowledge.json")
    return parser.parse_args()


if __name__ == "__main__":
    options = parse()
    report = asyncio.run(main(options))
    text = json.dumps(report, indent=2)
    print(text)
    options.json.parent.mkdir(parents=True, exist_ok=True)
    options.json.write_text(text + "\n")
