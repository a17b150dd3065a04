"""Where a running `bzzz serve` answers: the file it keeps in its slot while it runs.

`bzzz serve` writes ``slots/<n>.serving.json`` in the data directory once its node runs (the
slot number, its process id, the bound host and port, the MCP, dashboard and REST URLs) and
removes it when it stops. `bzzz config show` and `bzzz status` read it to say what a running
node runs with, whatever the settings of the shell they run in say. A file whose process is
gone (a node killed with SIGKILL) is stale and ignored.

Plain files and ``json`` only: the commands that read it answer in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SUFFIX = ".serving.json"
# A serving file is a few hundred bytes; anything larger is not one of ours.
MAX_BYTES = 16_384


def serving_path(data_dir: Path, slot: int) -> Path:
    """The file of the node serving from slot ``slot`` of ``data_dir``."""
    return data_dir / "slots" / f"{slot}{SUFFIX}"


def urls(host: str, port: int) -> dict[str, str]:
    """The URLs a node bound to ``host:port`` serves (MCP, dashboard, REST)."""
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    return {
        "mcp_url": f"{base}/mcp",
        "dashboard_url": f"{base}/ui",
        "api_url": f"{base}/api/v1",
        "health_url": f"{base}/healthz",
    }


@contextlib.contextmanager
def serving(data_dir: Path, facts: dict[str, Any]) -> Iterator[Path]:
    """Keep the serving file of ``facts`` (with ``slot``) for the time of the block."""
    path = serving_path(data_dir, int(facts["slot"]))
    shown = {
        "pid": os.getpid(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **facts,
    }
    # Written whole, then renamed: a reader never sees half a file.
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(shown, indent=2) + "\n", encoding="utf-8")
    partial.chmod(0o600)
    partial.replace(path)
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process holds that id: alive, though not ours
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("pid"), int):
        return None
    return found


def running(data_dir: Path) -> list[dict[str, Any]]:
    """The nodes serving from ``data_dir`` now, by slot, each with ``source`` (its file)."""
    found: list[dict[str, Any]] = []
    slots = data_dir.expanduser() / "slots"
    with contextlib.suppress(OSError):
        for path in sorted(slots.glob(f"*{SUFFIX}")):
            facts = _read(path)
            if facts is not None and _alive(facts["pid"]):
                found.append({**facts, "source": str(path)})
    found.sort(key=lambda facts: int(facts.get("slot", 0)))
    return found
