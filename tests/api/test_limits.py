"""Spawned nodes under a flood: bodies counted while read, idle sockets that cost nothing.

The node's memory is read from /proc (VmRSS) before and after; its open-file limit is set in
the child before it starts, as a login shell sets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from access.support import mcp_client
from e2e.support import HttpNode, node_env

pytestmark = pytest.mark.integration

MB = 1 << 20
FLOOD_BODY = 300 * MB
LIMIT = 4 * MB  # limits.http_max_body_bytes, the default
ANSWER_WITHIN = 2.0


def rss_bytes(pid: int) -> int:
    """The resident memory of a process (VmRSS in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def open_files_limit(soft: int, hard: int | None = None) -> Callable[[], None]:
    """A preexec function setting the child's RLIMIT_NOFILE (hard: keep the current one)."""
    current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard or current_hard))

    return apply


async def spawn(data_dir: Path, logs: Path, env: dict[str, str], **kwargs: Any) -> HttpNode:
    node = HttpNode(data_dir, node_env(env, data_dir), logs, real=True, **kwargs)
    # Starting is slow on a loaded machine; what is measured comes after.
    await node.start(within=60)
    return node


def chunks(total: int, size: int = MB) -> Iterator[bytes]:
    """A body of ``total`` bytes in chunks (sent chunked: no Content-Length)."""
    block = b"x" * size
    for _ in range(total // size):
        yield block


HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post_flood(url: str) -> httpx.Response:
    """POST 300 MB chunked to ``url``: the node answers before the body ends.

    A blocking client, as curl is: it reads the answer after the node stops reading (an
    asyncio client drops what arrived once its write fails).
    """
    return httpx.post(url, content=chunks(FLOOD_BODY), headers=HEADERS, timeout=60)


def post_declared(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """A request head declaring a 300 MB body, and two bytes of it: the status and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {FLOOD_BODY}\r\n\r\n{{}}"
        )
        sock.sendall(head.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


@pytest.mark.parametrize(
    "path",
    ["/api/v1/agents", "/agents/anyone/tasks", "/mcp", "/api/v1/threads/t-1/messages"],
)
async def test_a_300_mb_body_is_answered_413_while_read_and_memory_stays_flat(
    path: str, data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node = await spawn(data_dir, tmp_path / "logs", clean_env)
    assert node.proc is not None
    try:
        before = rss_bytes(node.proc.pid)
        chunked = await asyncio.to_thread(post_flood, node.base_url + path)
        declared_status, declared = await asyncio.to_thread(post_declared, node.port, path)
        after = rss_bytes(node.proc.pid)
        health = await node.health()
    finally:
        await node.kill()
    print(f"{path}: RSS {before / MB:.1f} MB -> {after / MB:.1f} MB")
    assert chunked.status_code == 413 and declared_status == 413, chunked.text
    for body in (chunked.json(), declared):
        assert body["success"] is False and body["code"] == "INVALID_PARAMETERS", body
        assert body["details"]["limit"] == LIMIT
    assert after - before <= 20 * MB, (before, after)
    assert health["healthy"] is True


@contextlib.asynccontextmanager
async def idle_sockets(port: int, count: int) -> AsyncIterator[list[socket.socket]]:
    """``count`` connections to ``port`` that send nothing, held by this process."""
    held: list[socket.socket] = []
    loop = asyncio.get_running_loop()
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            held.append(sock)
            await loop.sock_connect(sock, ("127.0.0.1", port))
        yield held
    finally:
        for sock in held:
            sock.close()


async def answered(node: HttpNode) -> tuple[int, bool]:
    """/healthz's status and whether a fresh MCP client (the SDK's default) lists the tools,
    each within the bound (a TimeoutError fails the test)."""
    async with httpx.AsyncClient(base_url=node.base_url, timeout=ANSWER_WITHIN) as client:
        async with asyncio.timeout(ANSWER_WITHIN):
            health = await client.get("/healthz")
    async with asyncio.timeout(ANSWER_WITHIN), mcp_client(node.mcp_url, "stateless") as fresh:
        tools = await fresh.list_tools()
    return health.status_code, any(t.name == "bzzz_lookup" for t in tools.tools)


async def test_1500_idle_sockets_of_one_process_leave_the_node_to_others(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    # A login shell's soft limit; the node raises it to the hard one at start.
    node = await spawn(data_dir, tmp_path / "logs", clean_env, preexec=open_files_limit(1024))
    try:
        async with idle_sockets(node.port, 1500):
            health, tools = await answered(node)
    finally:
        await node.kill()
    assert (health, tools) == (200, True)


def nofile_limits(pid: int) -> tuple[int, int]:
    """The soft and hard "Max open files" of a process (in /proc/<pid>/limits)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open-file limit for {pid}")


def command_of(pid: int) -> tuple[Path, list[str]]:
    """The executable a process runs and its arguments (from /proc/<pid>)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return Path(f"/proc/{pid}/exe").resolve(), argv


async def test_the_node_raises_its_open_file_soft_limit_to_the_hard_one_at_start(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard <= 1024:
        pytest.skip(f"the hard open-file limit ({hard}) leaves nothing to raise from 1,024")
    node = await spawn(data_dir, tmp_path / "logs", clean_env, preexec=open_files_limit(1024))
    assert node.proc is not None
    try:
        # The pid is the node's Python process itself (the console script exec'd, no wrapper).
        executable, argv = command_of(node.proc.pid)
        limits = nofile_limits(node.proc.pid)
    finally:
        await node.kill()
    assert executable.name.startswith("python"), executable
    assert "serve" in argv, argv
    assert limits == (hard, hard)


async def test_near_the_open_file_limit_the_oldest_idle_sockets_close_first(
    data_dir: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    # No room to raise: soft and hard are 1,024, and 1,500 sockets do not fit.
    node = await spawn(data_dir, tmp_path / "logs", clean_env, preexec=open_files_limit(1024, 1024))
    try:
        async with idle_sockets(node.port, 1500) as held:
            health, tools = await answered(node)
            oldest_closed = closed_by_peer(held[0])
            newest_closed = closed_by_peer(held[-1])
    finally:
        await node.kill()
    assert (health, tools) == (200, True)
    assert oldest_closed and not newest_closed


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the node closed this connection (EOF or reset waiting to be read)."""
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
