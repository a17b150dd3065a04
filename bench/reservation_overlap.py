"""The worst case of a reservation request's overlap check (issue 32).

A request's patterns are checked against the live patterns of its project in the log's
applier, on every node that serves the project. The shapes below are chosen to be slow for
the algorithm in ``bzzz.reservations.globs`` (all pairs disjoint, so no early answer; every
pattern different, so no remembered answer helps), at the limits a pattern may have
(``MAX_PATTERN_LENGTH``, ``MAX_SEGMENTS``, ``MAX_WILDCARDS``):

- ``issue_16x16``: the issue's attack at the limits: 16 patterns ``*aaaa…*aaaa…*…x`` against
  16 ``…y`` (the issue's own 512-character, 256-wildcard shapes are refused: counted);
- at the documented caps, 16 requested patterns against 1,024 live ones (64 reservations of
  16 patterns, the most one agent holds and a project holds):
  ``stars``   one segment, 16 ``*`` (the issue's shape);
  ``sets``    a loop-less segment with ``?`` (at most 32 characters) against a looped one
              (the character search in Python);
  ``text``    a 244-character plain segment against a looped one with sets (the character
              search by regular expressions);
  ``depth``   a loop-less 32-segment path against ``**/a/…/a/*/**/…`` (the segment search);
  ``heads``   both with ``**`` and long class heads (first and last chunks compared);
  ``flat``    32 segments of ``*x*`` against the same with another last segment.

For each: ``cold_ms``, the whole check with nothing remembered (what the applier would do
inline); ``warm_ms``, the part the projector runs off the event loop first (in a worker
thread: ``reservations.projection.prepare``); ``on_loop_ms``, the applier's check after it
(median and largest of the rounds: the largest also holds the machine's own hiccups).

``--node`` also runs the ``stars``, ``sets`` and ``depth`` caps through a node (SQLite,
in-memory bus): an agent fills the project with 1,008 patterns (a request past 1,024 is refused
before any check), another asks for 16, while a third client
reads (``bzzz_lookup``) in a loop; figures: the request's latency, the longest the event loop
was held (a 1 ms ticker's largest gap), and the reads served meanwhile.

    .venv/bin/python bench/reservation_overlap.py [--node] [--rounds 3] \
        [--json bench/results/reservation_overlap.json]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchutil import code_version, machine, report
from bzzz.config import load_settings
from bzzz.domain import utcnow
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.reservations import globs, projection
from bzzz.reservations.globs import MAX_PATTERN_LENGTH, PatternError, normalize
from bzzz.reservations.projection import MAX_PATHS, PER_PROJECT
from bzzz.reservations.schemas import ReserveInput
from bzzz.schemas import AnnounceInput, LookupInput
from bzzz.store.models import ReservationRow

LIVE = PER_PROJECT  # 1,024 patterns: 64 reservations x 16
ALPHABET = "bcdefghijklmnopqrstuvwxyz"


def tag(n: int) -> str:
    """A short distinct word (no 'a'): makes every pattern different."""
    text = ""
    while True:
        text += ALPHABET[n % len(ALPHABET)]
        n //= len(ALPHABET)
        if not n:
            return text


def stars(n: int, end: str) -> str:
    body = ("*" + "a" * 14) * 15 + "*" + tag(n)
    return body[: MAX_PATTERN_LENGTH - 1] + end


# The shapes below start and end with a wildcard, so the plain text at their two ends (which
# decides the shape at once) says nothing, and the whole algorithm runs.


def sets_plain(n: int, end: str) -> str:
    return "?" + "a" * 26 + tag(n) + end + "?"


def sets_looped(n: int, end: str) -> str:
    return "*" + "a" * 8 + "*" + "a" * 8 + "*" + "a" * 4 + "*" + tag(n) + end + "*"


def text_plain(n: int, end: str) -> str:
    return "a" * 240 + tag(n) + end


def text_looped(n: int, end: str) -> str:
    return "*" + "a" * 14 + "[bc]*" + "a" * 3 + "?" * 3 + "*" + tag(n) + end + "?"


def depth_plain(n: int, end: str) -> str:
    return "/".join(["?"] + ["a"] * 30 + [tag(n) + end + "?"])


def depth_looped(n: int, end: str) -> str:
    return "**/" + "/".join(["a"] * 14 + ["*"]) + "/**/*" + tag(n) + end + "*"


def heads(n: int, end: str) -> str:
    return "/".join(f"[ab]{k}" for k in range(13)) + "/**/" + tag(n) + end + "?"


def flat(n: int, end: str) -> str:
    return "/".join(["*x*"] * 5 + ["x"] * 26 + [tag(n) + end + "?"])


Shape = Callable[[int, str], str]
FAMILIES: dict[str, tuple[Shape, Shape]] = {
    "stars": (stars, stars),
    "sets": (sets_plain, sets_looped),
    "text": (text_plain, text_looped),
    "depth": (depth_plain, depth_looped),
    "heads": (heads, heads),
    "flat": (flat, flat),
}


def forget() -> None:
    """Nothing remembered: every pair is decided afresh."""
    for cached in (globs._overlap_cached, globs._segments_overlap, globs.overlaps_any):
        cached.cache_clear()


def rows_of(patterns: list[str]) -> list[ReservationRow]:
    now = utcnow()
    rows = []
    for k in range(0, len(patterns), MAX_PATHS):
        rows.append(
            ReservationRow(
                id=f"r{k:05d}",
                project="p",
                agent_id="filler",
                owner="bench",
                mode="exclusive",
                paths=patterns[k : k + MAX_PATHS],
                origin="n",
                created_at=now + timedelta(microseconds=k),
                expires_at=now + timedelta(hours=1),
            )
        )
    return rows


def check(requested: list[str], live: list[str], rounds: int) -> dict[str, Any]:
    rows = rows_of(live)
    cold, warm, on_loop = [], [], []
    for _ in range(rounds):
        forget()
        started = time.perf_counter()
        found = projection.conflict_of(rows, "attacker", "exclusive", requested)
        cold.append(time.perf_counter() - started)
        forget()
        started = time.perf_counter()
        projection._warm([(tuple(requested), sorted(set(live)))])
        warm.append(time.perf_counter() - started)
        started = time.perf_counter()
        again = projection.conflict_of(rows, "attacker", "exclusive", requested)
        on_loop.append(time.perf_counter() - started)
        assert found is None and again is None, "the shapes are meant to be disjoint"
    pairs = len(requested) * len(live)
    return {
        "requested": len(requested),
        "live": len(live),
        "pairs": pairs,
        "cold_ms": round(max(cold) * 1000, 2),
        "cold_us_per_pair": round(max(cold) / pairs * 1e6, 3),
        "warm_ms": round(max(warm) * 1000, 2),
        "on_loop_ms": round(max(on_loop) * 1000, 3),
        "on_loop_median_ms": round(statistics.median(on_loop) * 1000, 3),
    }


def decisions(rounds: int) -> dict[str, Any]:
    refused = 0
    for n in range(16):
        try:
            normalize("*a" * 255 + "*" + tag(n) + "x")
        except PatternError:
            refused += 1
    out: dict[str, Any] = {"issue_original_refused": f"{refused}/16"}
    requested = [normalize(stars(n, "x")) for n in range(MAX_PATHS)]
    live = [normalize(stars(n, "y")) for n in range(MAX_PATHS)]
    out["issue_16x16"] = check(requested, live, rounds)
    for name, (mine, theirs) in FAMILIES.items():
        requested = [normalize(mine(n, "x")) for n in range(MAX_PATHS)]
        live = [normalize(theirs(10_000 + n, "y")) for n in range(LIVE)]
        out[f"caps_{name}"] = check(requested, live, rounds)
    return out


# --- through a node ----------------------------------------------------------------------------


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def _reads(node: Node, served: list[float], stop: asyncio.Event) -> None:
    reader = Caller("reader")
    while not stop.is_set():
        await node.agents.lookup(reader, LookupInput(semantic_address="bzzz://*@shop"))
        served.append(time.perf_counter())
        await asyncio.sleep(0)  # a lookup from the directory may not wait for anything


async def through_node(name: str, root: Path) -> dict[str, Any]:
    mine, theirs = FAMILIES[name]
    settings = load_settings(environ={}, overrides={"node": {"data_dir": str(root / name)}})
    async with Node(settings, bus=InMemoryBus()) as node:
        filler, attacker = Caller("filler-session"), Caller("attacker-session")
        for caller, agent in ((filler, "filler"), (attacker, "attacker")):
            await node.agents.announce(
                caller, AnnounceInput(agent_id=agent, role="dev", project="shop")
            )
        # The most a request is checked against: the project's 1,024 patterns less its 16.
        live = [theirs(10_000 + n, "y") for n in range(LIVE - MAX_PATHS)]
        for k in range(len(live) // MAX_PATHS):
            paths = live[k * MAX_PATHS : (k + 1) * MAX_PATHS]
            await node.reservations.reserve(filler, ReserveInput(paths=paths, ttl=3600))
        forget()
        requested = [mine(n, "x") for n in range(MAX_PATHS)]
        gaps: list[float] = []
        served: list[float] = []
        stop = asyncio.Event()
        ticking = asyncio.create_task(_ticker(gaps, stop))
        reading = asyncio.create_task(_reads(node, served, stop))
        await asyncio.sleep(0.2)
        gaps.clear()
        started = time.perf_counter()
        answer = await node.reservations.reserve(attacker, ReserveInput(paths=requested, ttl=3600))
        took = time.perf_counter() - started
        stop.set()
        await asyncio.gather(ticking, reading)
    meanwhile = sum(1 for t in served if started <= t <= started + took)
    return {
        "granted": answer["success"],
        "request_ms": round(took * 1000, 1),
        "longest_loop_gap_ms": round(max(gaps) * 1000, 2),
        "reads_served_during_request": meanwhile,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--node", action="store_true", help="also run the caps through a node")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    results: dict[str, Any] = {
        "bench": "reservation_overlap",
        "machine": machine(),
        "code": code_version(),
        "limits": {
            "pattern_length": MAX_PATTERN_LENGTH,
            "segments": globs.MAX_SEGMENTS,
            "wildcards": globs.MAX_WILDCARDS,
            "paths_per_request": MAX_PATHS,
            "patterns_per_project": PER_PROJECT,
        },
        "decisions": decisions(args.rounds),
    }
    if args.node:
        with tempfile.TemporaryDirectory() as tmp:
            results["node"] = {
                name: asyncio.run(through_node(name, Path(tmp)))
                for name in ("stars", "sets", "depth")
            }
    report(results, args.json)


if __name__ == "__main__":
    main()
