"""How long `bzzz reservations check` takes against a local running node (issue 35: ≤ 150 ms).

The bench makes a temporary data directory, starts `bzzz serve` there (tokens required, an
embedded nats-server, SQLite), makes agent tokens for alice and bob (project ``shop``),
announces both and has alice reserve ``src/**``; with ``--busy`` a third agent also holds
``PER_PROJECT``-scale patterns (60 reservations of 16 patterns), so every checked path is
compared with ~960 live patterns. Then it times, each ``--runs`` times, as a hook runs them:

- ``cli refused``: `bzzz reservations check src/a.py --agent bob --token … --json` (exit 1),
  the `bzzz` console script beside this Python, a fresh process, wall clock from spawn to exit;
- ``cli allowed``: the same for alice (exit 0), and ``cli 20 paths`` (bob, 20 paths);
- ``rest``: the REST call alone (``POST /api/v1/reservations/check``, a new connection each
  time, as the CLI makes it), from this process;
- ``python -c pass`` and the light command's imports alone
  (``python -c "import bzzz.entry, bzzz.light.check"``), to see where a run's time goes;
- ``full cli``: the same check through ``python -m bzzz.cli`` (the whole CLI's parser and
  settings), what the light entry avoids.

Figures: wall seconds p50 / p90 / p99 / max, and the CPU seconds of the process (median): on
a shared machine the CPU figure moves less with the load than the wall clock. The commands run
as an installed `bzzz` does, with its bytecode cached (``PYTHONDONTWRITEBYTECODE`` is dropped
from their environment and one untimed run of each writes it): a run that compiles the light
modules each time costs ~9 ms more CPU.

    .venv/bin/python bench/reservation_check.py [--runs 30] [--busy]
        [--json bench/results/reservation_check.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchutil import code_version, machine, percentile

BZZZ = str(Path(sys.executable).parent / "bzzz")
ADMIN = "bench-admin-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@contextlib.contextmanager
def _served(env: dict[str, str], port: int) -> Iterator[None]:
    """`bzzz serve` on the data directory, until /healthz answers; stopped (SIGTERM) after."""
    log = open(Path(env["BZZZ_DATA_DIR"]).parent / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([BZZZ, "serve"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"bzzz serve exited with {proc.returncode}: see {log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("bzzz serve did not answer /healthz in 120 s") from None
                time.sleep(0.2)  # a bench polls a process it does not own the events of
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _token(env: dict[str, str], agent: str) -> str:
    done = subprocess.run(
        [BZZZ, "token", "create", agent, "--agent", agent, "--project", "shop", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    token: str = json.loads(done.stdout.strip().splitlines()[-1])["token"]
    return token


async def _prepare(mcp_url: str, tokens: dict[str, str], busy: bool) -> None:
    """Announce the agents and make the reservations, through MCP with each agent's token."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    for agent, token in tokens.items():
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(mcp_url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("bzzz_announce", {"agent_id": agent, "role": "dev"})
            if agent == "alice":
                await session.call_tool("bzzz_reserve", {"paths": ["src/**"], "ttl": 86400})
            if agent == "carol":
                for n in range(60):
                    paths = [f"area{n}/mod{m}/**" for m in range(16)]
                    answer = await session.call_tool("bzzz_reserve", {"paths": paths, "ttl": 86400})
                    assert not answer.is_error, answer.structured_content


def _run(args: list[str], env: dict[str, str], expect: int) -> tuple[float, float]:
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - started
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return took, _children_cpu() - cpu


def _figures(runs: list[tuple[float, float]]) -> dict[str, float]:
    ordered = sorted(wall for wall, _ in runs)
    return {
        "p50": round(statistics.median(ordered), 4),
        "p90": round(percentile(ordered, 90), 4),
        "p99": round(percentile(ordered, 99), 4),
        "min": round(ordered[0], 4),
        "max": round(ordered[-1], 4),
        "cpu_median": round(statistics.median(cpu for _, cpu in runs), 4),
        "runs": len(ordered),
    }


def _rest(base: str, token: str, runs: int) -> list[tuple[float, float]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from bzzz.light import http

    found = []
    body = {"agent": "bob", "paths": ["src/a.py"], "source": "cli"}
    for _ in range(runs):
        cpu = time.process_time()
        started = time.perf_counter()
        answer = http.post_json(base, "/api/v1/reservations/check", body, token)
        found.append((time.perf_counter() - started, time.process_time() - cpu))
        assert answer["allowed"] is False
    return found


def measure(runs: int, busy: bool) -> dict[str, Any]:
    """Every figure of the module docstring."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-check-") as tmp:
        port = _free_port()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("BZZZ_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(
            BZZZ_DATA_DIR=str(Path(tmp) / "data"),
            BZZZ_HTTP_PORT=str(port),
            BZZZ_AUTH_TOKENS=ADMIN,
        )
        with _served(env, port):
            agents = ["alice", "bob", *(["carol"] if busy else [])]
            tokens = {agent: _token(env, agent) for agent in agents}
            asyncio.run(_prepare(f"http://127.0.0.1:{port}/mcp", tokens, busy))
            check = [BZZZ, "reservations", "check", "--json"]
            bob = ["--agent", "bob", "--token", tokens["bob"]]
            alice = ["--agent", "alice", "--token", tokens["alice"]]
            many = [f"src/m{n}.py" for n in range(20)]
            timed = {
                "cli refused": ([*check, "src/a.py", *bob], 1),
                "cli allowed": ([*check, "src/a.py", *alice], 0),
                "cli 20 paths": ([*check, *many, *bob], 1),
                "python -c pass": ([sys.executable, "-c", "pass"], 0),
                "light imports": (
                    [sys.executable, "-c", "import bzzz.entry, bzzz.light.check"],
                    0,
                ),
                "full cli": (
                    [sys.executable, "-m", "bzzz.cli", "reservations", "check", "src/a.py", *bob],
                    1,
                ),
            }
            for name, (args, expect) in timed.items():
                _run(args, env, expect)  # untimed: writes the bytecode an installed one has
                count = runs if name != "full cli" else max(3, runs // 3)
                results[name] = _figures([_run(args, env, expect) for _ in range(count)])
            results["rest"] = _figures(_rest(f"http://127.0.0.1:{port}", tokens["bob"], runs * 3))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--busy", action="store_true", help="~960 live patterns in the project")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = measure(args.runs, args.busy)
    print(f"{'what':16} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'cpu':>8}  (seconds)")
    for name, f in results.items():
        shown = (f["p50"], f["p90"], f["p99"], f["max"], f["cpu_median"])
        print(f"{name:16}" + "".join(f" {x:8.4f}" for x in shown) + f"  ({f['runs']} runs)")
    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    print(f"load average before / after: {load[0]} / {load[1]}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        shown_json = {
            "bench": "reservation_check",
            "code": code_version(),
            "machine": machine(),
            "busy": args.busy,
            "load_average": load,
            "results": results,
        }
        args.json.write_text(json.dumps(shown_json, indent=2) + "\n")


if __name__ == "__main__":
    main()
