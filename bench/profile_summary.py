"""Summarize a py-spy collapsed-stack profile (``py-spy record --format raw``): where time goes.

    .venv/bin/python bench/profile_summary.py bench/results/profile_bzzz_post_1t.folded [--top 20]

py-spy's own idle detection does not work on every machine (here it kept threads blocked in
epoll, ``queue.get`` or ``waitpid``), so a sample whose innermost frame is at a blocking wait
(found by reading that source line) counts as idle and is left out. Of the other (busy)
samples it prints: the package the innermost frame is in (the layer that burns the time), the
functions with the most self time, and the functions with the most inclusive time (frames of
the event loop and thread machinery, present in nearly every stack, are left out).
"""

from __future__ import annotations

import argparse
import contextlib
import linecache
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^():]+)(?::(?P<line>\d+))?\)$")
# Source lines at which a thread blocks: a sample stopped there is an idle thread.
_WAITS = re.compile(r"\.get\(\)|\.get\(block|\.select\(|waitpid|\.acquire\(|\bwait\(|\.poll\(")
# Frames found in nearly every stack: they say nothing about where the time goes.
GENERIC = (
    "asyncio/",
    "threading.py",
    "runpy.py",
    "selectors.py",
    "concurrent/futures/thread.py",
    "contextlib.py",
    "anyio/_backends/",
    "anyio/_core/_tasks.py",
    "<module>",
)
# Display names of the layers a leaf frame can be in (checked in order, first match wins).
LAYERS = (
    ("bzzz/", "bzzz"),
    ("mcp/", "mcp SDK"),
    ("mcp_types/", "mcp SDK"),
    ("pydantic", "pydantic"),
    ("sqlalchemy/", "sqlalchemy"),
    ("aiosqlite/", "aiosqlite"),
    ("sqlite3/", "sqlite3"),
    ("nats/", "nats-py"),
    ("starlette/", "starlette"),
    ("sse_starlette/", "sse-starlette"),
    ("uvicorn/", "uvicorn"),
    ("h11/", "h11"),
    ("httpx", "httpx"),
    ("httpcore/", "httpcore"),
    ("anyio/", "anyio"),
    ("asyncio/", "asyncio"),
    ("json/", "json"),
    ("jsonschema", "jsonschema"),
    ("cryptography/", "cryptography"),
    ("ulid/", "ulid"),
    ("logging/", "logging"),
    ("opentelemetry/", "opentelemetry"),
)


# Stages of a request, for the "time by stage" table: the first whose marker is in a sample's
# stack (in this order) takes the sample.
STAGES = (
    ("projector (verify, apply, commit)", ("Projector.", "bzzz/store/batch.py", "_write_sync")),
    ("tool body (bzzz service call / no-op)", ("bzzz/mcp/server.py", "build_app.<locals>.noop (")),
    ("MCP SDK dispatch (JSON-RPC, validation)", ("mcp/server/runner.py", "jsonrpc_dispatcher")),
    ("nats-py client", ("nats/aio/",)),
    (
        "HTTP + SSE transport",
        ("sse_starlette", "uvicorn/", "h11/", "starlette/", "streamable_http"),
    ),
    ("MCP client (SDK, httpx2, jsonschema)", ("mcp/client/", "httpx", "jsonschema")),
)


def stage_of(frames: list[str]) -> str:
    """The request stage a busy sample belongs to."""
    joined = ";".join(frames)
    for name, markers in STAGES:
        if any(marker in joined for marker in markers):
            return name
    return "other (event loop, GC, threads)"


def parse_frame(frame: str) -> tuple[str, str]:
    """(function, file) of one py-spy frame ``func (path/file.py:line)``."""
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip(), ""
    return match["func"], match["file"]


def _source_line(file: str, line: int) -> str:
    for root in sys.path:
        path = Path(root) / file
        if path.is_file():
            return linecache.getline(str(path), line)
    return ""


def is_idle(leaf: str) -> bool:
    """True when the innermost frame sits at a blocking wait (queue get, epoll, waitpid...)."""
    match = _FRAME.match(leaf.strip())
    if not match or not match["line"]:
        return False
    return bool(_WAITS.search(_source_line(match["file"], int(match["line"]))))


def layer_of(file: str) -> str:
    """The package (layer) a source file belongs to."""
    for marker, name in LAYERS:
        if marker in file:
            return name
    return file.split("/", 1)[0] if "/" in file else (file or "other")


def load(path: Path) -> list[tuple[list[str], int]]:
    """The stacks of a collapsed-stack file, outermost frame first, with their sample counts."""
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def summarize(stacks: list[tuple[list[str], int]]) -> dict[str, Counter[str]]:
    """Counters of busy samples by layer, by self frame and by inclusive frame."""
    layers: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for frames, count in stacks:
        if is_idle(frames[-1]):
            continue
        stages[stage_of(frames)] += count
        func, file = parse_frame(frames[-1])
        layers[layer_of(file)] += count
        own[f"{func} ({file})"] += count
        seen = set()
        for frame in frames:
            func, file = parse_frame(frame)
            key = f"{func} ({file})"
            if key in seen or any(g in file or g in func for g in GENERIC):
                continue
            seen.add(key)
            inclusive[key] += count
    return {"layers": layers, "stages": stages, "self": own, "inclusive": inclusive}


def render(path: Path, top: int) -> str:
    """The summary as text."""
    stacks = load(path)
    parts = summarize(stacks)
    samples = sum(count for _, count in stacks)
    total = sum(parts["layers"].values()) or 1
    lines = [f"{path.name}: {samples} samples, {total} busy (shares below are of busy samples)"]
    for title, key, n in (
        ("time by stage of the request", "stages", 10),
        ("time by layer (innermost frame)", "layers", 15),
        ("self time", "self", top),
        ("inclusive time", "inclusive", top),
    ):
        lines.append(f"-- {title}")
        for name, count in parts[key].most_common(n):
            lines.append(f"  {100 * count / total:5.1f}%  {name}")
    return "\n".join(lines)


@contextlib.contextmanager
def recording(pid: int, out: Path, *, enabled: bool = True, rate: int = 250) -> Iterator[None]:
    """Sample ``pid`` with py-spy into ``out`` (collapsed stacks) while the block runs.

    Writes the summary beside it (``.txt``). Does nothing when disabled or without py-spy.
    """
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not enabled or not Path(exe).exists():
        yield
        return
    spy = subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # let py-spy attach before the measured phase
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
        if out.exists():
            out.with_suffix(".txt").write_text(render(out, top=30) + "\n")


def main() -> None:
    """Print the summary of each file given."""
    parser = argparse.ArgumentParser(description="summarize py-spy collapsed stacks")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    for path in args.files:
        print(render(path, args.top))
        print()


if __name__ == "__main__":
    main()
