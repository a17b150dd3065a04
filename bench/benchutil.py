"""Helpers shared by the benchmarks: the machine, percentiles, CPU accounting from /proc."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (nan when empty)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, round(pct / 100 * len(sorted_values) + 0.5))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def machine() -> dict[str, Any]:
    """nproc, RAM, CPU model, Python version."""
    mem_kb = 0
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "ram_gb": round(mem_kb / 1024**2, 1),
        "cpu": model,
        "python": platform.python_version(),
    }


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            found.extend(int(child) for child in (task / "children").read_text().split())
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc)."""
    result, todo = [], [pid]
    while todo and len(result) < 1000:
        kids = _children(todo.pop())
        result.extend(kids)
        todo.extend(kids)
    return result


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (0 for ones that are gone)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat)."""
    with contextlib.suppress(OSError):
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
        return (user + nice + system + irq + softirq + steal) / CLK_TCK
    return 0.0


class CpuWindow:
    """CPU used over a window: by our processes, and by everything else on the machine.

    Other work on the machine (another test suite, say) skews a benchmark on few cores; the
    reports carry ``others_cpu_pct`` so a skewed figure can be told from a real one.
    """

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self._ours = cpu_seconds(pids)
        self._busy = busy_seconds()

    def stop(self, extra_ours: float = 0.0) -> dict[str, float]:
        """(ours, others) in CPU seconds; ``extra_ours`` adds CPU of ours not in ``pids``."""
        ours = cpu_seconds(self.pids) - self._ours + extra_ours
        busy = busy_seconds() - self._busy
        return {"ours": ours, "others": max(0.0, busy - ours)}


def code_version() -> dict[str, Any]:
    """Which bzzz is measured: its import path, the repository's commit, a hash of its sources.

    The hash covers every .py file of the imported package, so a run on uncommitted code (or on
    a copy of the tree put first on PYTHONPATH) is still identified.
    """
    import bzzz

    package = Path(bzzz.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "src"],
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "bzzz_package": str(package),
        "head_commit": done.stdout.strip(),
        "worktree_src_dirty": bool(status.stdout.strip()),
        "sources_sha256": digest.hexdigest()[:16],
    }


def wait_for_quiet(max_wait: float, threshold_pct: float = 20.0, sample: float = 2.0) -> float:
    """Wait until the machine is nearly idle before a measurement; return the busy % last seen.

    Busy is measured over ``sample`` seconds, in % of one core, for the whole machine (our own
    servers idle meanwhile). Gives up after ``max_wait`` seconds and returns what it saw, so a
    figure measured beside other work carries that fact.
    """
    deadline = time.monotonic() + max_wait
    while True:
        before = busy_seconds()
        time.sleep(sample)
        busy_pct = 100 * (busy_seconds() - before) / sample
        if busy_pct < threshold_pct or time.monotonic() >= deadline:
            return round(busy_pct, 1)


def posted_payload(
    message_id: str, sender: str, recipient: str, address: str, content: Any
) -> dict:
    """A ``message.posted`` payload of a plain data message from ``sender`` to ``recipient``
    (``address`` its target address), as the benches write history straight onto the log."""
    return {
        "message_id": message_id,
        "sender": sender,
        "target_address": address,
        "message_type": "data",
        "content": content,
        "priority": "medium",
        "thread_id": None,
        "reply_to": None,
        "recipients": [recipient],
        "task_id": None,
    }


def report(results: dict[str, Any], path: Path | None) -> None:
    """Print a bench's figures as JSON, and write them to ``path`` when given (``--json``)."""
    text = json.dumps(results, indent=2)
    print(text)
    if path is not None:
        path.write_text(text + "\n")
