"""The fleet of ``bench/scale.py``: which node serves what in which process, and the
conversation with a worker process (``bench/scale_worker.py``) over its stdin and stdout."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchutil import percentile

WORKER = Path(__file__).resolve().parent / "scale_worker.py"


@dataclass
class NodeSpec:
    """One node of the run: its name, data directory, projects and worker process."""

    name: str
    dir: str
    projects: list[str]
    worker: str
    deferred: bool = False  # started later (the bootstrapped node)


@dataclass
class Layout:
    """Which node serves what, in which process."""

    projects: list[str]
    nodes: list[NodeSpec] = field(default_factory=list)

    def node(self, name: str) -> NodeSpec:
        """The node of that name."""
        return next(n for n in self.nodes if n.name == name)

    def serving(self, project: str, *, packed: bool = False) -> list[NodeSpec]:
        """The started nodes serving ``project`` by name (``packed``: without ``one``)."""
        return [
            n
            for n in self.nodes
            if project in n.projects and not n.deferred and not (packed and n.name == "one")
        ]

    def workers(self) -> list[str]:
        """Every worker process's name."""
        return sorted({n.worker for n in self.nodes})


def plan(nodes: int, projects: int, workers: int, root: Path) -> Layout:
    """The layout of the module docstring."""
    names = [f"p{i + 1:02d}" for i in range(projects)]
    layout = Layout(names)
    layout.nodes.append(NodeSpec("star", str(root / "star"), ["*"], "w-star"))
    layout.nodes.append(NodeSpec("one", str(root / "one"), [names[0]], "w-one"))
    packed = nodes - 2
    each = min(projects, max(1, math.ceil(2 * projects / packed)))
    for i in range(packed):
        served = sorted({names[(i * each + j) % projects] for j in range(each)})
        worker = f"w{i % workers:02d}"
        layout.nodes.append(NodeSpec(f"n{i:03d}", str(root / f"n{i:03d}"), served, worker))
    boot = names[1]
    layout.nodes.append(NodeSpec("boot", str(root / "boot"), [boot], "w-boot", deferred=True))
    thin = [p for p in names if len(layout.serving(p)) < 2]
    assert not thin, f"projects served by fewer than two named nodes: {thin}"
    return layout


def heartbeats_heard(layout: Layout) -> int:
    """Heartbeats the board delivers a round (``peers/service.py``'s layout): an
    every-project node beats under one key that every node hears; a named node beats under one
    key a project, each heard by the every-project nodes and that project's named nodes."""
    every = [n for n in layout.nodes if "*" in n.projects]
    named = [n for n in layout.nodes if "*" not in n.projects]
    serving = {p: sum(p in n.projects for n in named) for p in layout.projects}
    heard = len(every) * len(layout.nodes)
    for node in named:
        heard += sum(len(every) + serving[p] for p in node.projects)
    return heard


class WorkerProcess:
    """A worker process and the JSON-lines conversation with it."""

    def __init__(self, name: str, spec: Path, log: Path) -> None:
        self.name = name
        self._spec = spec
        self._log = log
        self._proc: asyncio.subprocess.Process | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = 0
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        """The process id."""
        assert self._proc is not None
        return self._proc.pid

    async def spawn(self) -> None:
        """Start the process (its nodes start on the ``start`` command)."""
        with self._log.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(WORKER),
                str(self._spec),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                limit=256 << 20,
            )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            answer = json.loads(line)
            future = self._waiting.pop(answer["id"])
            if answer["ok"]:
                future.set_result(answer["result"])
            else:
                future.set_exception(RuntimeError(f"{self.name}: {answer['error']}"))
        for future in self._waiting.values():
            future.set_exception(RuntimeError(f"{self.name} exited (see {self._log})"))

    async def call(self, op: str, **args: Any) -> Any:
        """Send one command and wait for its answer."""
        assert self._proc is not None and self._proc.stdin is not None
        self._ids += 1
        future = asyncio.get_running_loop().create_future()
        self._waiting[self._ids] = future
        self._proc.stdin.write(json.dumps({"id": self._ids, "op": op, **args}).encode() + b"\n")
        await self._proc.stdin.drain()
        return await future

    async def close(self, within: float = 60.0) -> None:
        """Close its stdin (it stops its nodes and exits); kill it if it does not."""
        if self._proc is None or self._proc.returncode is not None:
            return
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            async with asyncio.timeout(within):
                await self._proc.wait()
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()
        if self._reader is not None:
            await self._reader


def latency_figures(ms: list[float]) -> dict[str, float]:
    """count, p50, p99 and max of some times in ms."""
    ordered = sorted(ms)
    return {
        "count": len(ordered),
        "p50_ms": round(percentile(ordered, 50), 3),
        "p99_ms": round(percentile(ordered, 99), 3),
        "max_ms": round(ordered[-1], 3) if ordered else float("nan"),
    }


def spread(values: list[int]) -> dict[str, int]:
    """min, median and max of some sizes."""
    ordered = sorted(values)
    if not ordered:
        return {}
    return {"min": ordered[0], "median": ordered[len(ordered) // 2], "max": ordered[-1]}
