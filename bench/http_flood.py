"""One client against the node's HTTP door (issue 19): idle sockets, a 300 MB body, a session loop.

Spawns `bzzz serve` on a fresh data directory with an open-file limit set in the child before it
starts (``--soft`` / ``--hard``; the node raises the soft one to the hard one), then measures:

- ``idle``: this process holds ``--sockets`` connections that send nothing; the seconds until
  ``/healthz`` answers and until a fresh official MCP client (the sessionless default) lists
  the tools;
- ``body``: a 300 MB chunked POST to ``/api/v1/agents``: its status, the seconds to the answer,
  and the node's VmRSS / VmHWM (from /proc) before and after;
- ``sessions``: ``--sessions`` legacy ``initialize`` requests in a loop (no credential: one
  principal), their statuses, then another client's initialize and tool call.

    .venv/bin/python bench/http_flood.py [--sockets 1500] [--soft 1024] [--hard 1024]
        [--sessions 3000]

Prints the figures and writes bench/results/http_flood.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchutil import code_version, machine

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
HOST = "127.0.0.1"
MB = 1 << 20
OPENING = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found


@contextlib.contextmanager
def node(data_dir: Path, soft: int, hard: int) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A healthy `bzzz serve` with RLIMIT_NOFILE (soft, hard) set before it starts."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env["BZZZ_DATA_DIR"] = str(data_dir)
    log = (RESULTS / "http_flood.log").open("wb")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "bzzz"), "serve", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=limit,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://{HOST}:{port}/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            raise RuntimeError("the node did not become healthy")
        yield proc, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def idle(port: int, sockets: int) -> dict[str, Any]:
    """Hold ``sockets`` silent connections; time /healthz and a fresh client's tools/list."""
    loop = asyncio.get_running_loop()
    held: list[socket.socket] = []
    try:
        for _ in range(sockets):
            sock = socket.socket()
            sock.setblocking(False)
            held.append(sock)
            await loop.sock_connect(sock, (HOST, port))
        start = time.perf_counter()
        async with httpx.AsyncClient(timeout=30) as http:
            health = await http.get(f"http://{HOST}:{port}/healthz")
        health_s = time.perf_counter() - start
        start = time.perf_counter()
        http2 = httpx.AsyncClient(timeout=30)
        transport = streamable_http_client(f"http://{HOST}:{port}/mcp", http_client=http2)
        async with http2, Client(transport) as client:
            tools = await client.list_tools()
        tools_s = time.perf_counter() - start
        closed = sum(1 for s in held if _closed(s))
    finally:
        for sock in held:
            sock.close()
    return {
        "sockets": sockets,
        "healthz_status": health.status_code,
        "healthz_seconds": round(health_s, 3),
        "fresh_client_tools": len(tools.tools),
        "fresh_client_seconds": round(tools_s, 3),
        "idle_closed_by_node": closed,
    }


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def body(proc: subprocess.Popen[bytes], port: int) -> dict[str, Any]:
    """A 300 MB chunked POST: status, seconds, the node's memory before and after."""

    def chunks() -> Iterator[bytes]:
        block = b"x" * MB
        for _ in range(300):
            yield block

    before = memory(proc.pid)
    start = time.perf_counter()
    answer = httpx.post(
        f"http://{HOST}:{port}/api/v1/agents",
        content=chunks(),
        headers={"Content-Type": "application/json"},
        timeout=120,
    )
    seconds = time.perf_counter() - start
    after = memory(proc.pid)
    return {
        "status": answer.status_code,
        "seconds": round(seconds, 3),
        "rss_before_mb": round(before["VmRSS"], 1),
        "rss_after_mb": round(after["VmRSS"], 1),
        "hwm_before_mb": round(before["VmHWM"], 1),
        "hwm_after_mb": round(after["VmHWM"], 1),
    }


async def sessions(port: int, count: int) -> dict[str, Any]:
    """``count`` initialize requests in a loop, then another client's initialize and call."""
    url = f"http://{HOST}:{port}/mcp"
    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=30) as http:
        statuses = Counter(
            [(await http.post(url, json=OPENING, headers=ACCEPT)).status_code for _ in range(count)]
        )
    loop_s = time.perf_counter() - start
    start = time.perf_counter()
    http2 = httpx.AsyncClient(timeout=30)
    async with http2, Client(streamable_http_client(url, http_client=http2), mode="legacy") as c:
        result = await c.call_tool("bzzz_lookup", {"semantic_address": "bzzz://*"})
    return {
        "sessions": count,
        "statuses": dict(statuses),
        "loop_seconds": round(loop_s, 1),
        "newcomer_ok": not result.is_error,
        "newcomer_seconds": round(time.perf_counter() - start, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1500)
    parser.add_argument("--soft", type=int, default=1024)
    parser.add_argument("--hard", type=int, default=resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    parser.add_argument("--sessions", type=int, default=3000)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        node(Path(tmp), args.soft, args.hard) as (proc, port),
    ):
        figures = {
            "limits": {"soft": args.soft, "hard": args.hard},
            "idle": asyncio.run(idle(port, args.sockets)),
            "body": body(proc, port),
            "sessions": asyncio.run(sessions(port, args.sessions)),
        }
    print(json.dumps(figures, indent=2))
    out = {"figures": figures, "machine": machine(), "code": code_version()}
    (RESULTS / "http_flood.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
