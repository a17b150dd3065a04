"""Real-process helpers: spawned `bzzz` nodes, MCP client sessions, a local webhook receiver.

Every wait here is bounded; callers wrap the open-ended polls in ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

import httpx
import httpx2
import nats
import pytest
from launch import bzzz_executable
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from ports import free_port

from bzzz.network.jetstream import stream_name
from bzzz.network.sealing import Keyring, NetworkKey, encode_secret
from bzzz.retention.strip import opened_fields

# A bound, not a speed target: with the suite on several workers a node may start slowly.
START_TIMEOUT = 40.0
STOP_TIMEOUT = 10.0
CALL_TIMEOUT = 15.0
POLL = 0.05

T = TypeVar("T")


# --- processes ---------------------------------------------------------------------------------


def _proc_state(pid: int) -> str | None:
    """The /proc state letter of pid, None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The state follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    """Whether pid is a live process (a zombie counts as gone)."""
    state = _proc_state(pid)
    return state is not None and state != "Z"


def nats_servers_of(data_dir: Path) -> list[int]:
    """Pids of live nats-server processes whose config lives in data_dir (a /proc scan)."""
    conf = str(data_dir / "nats" / "nats.conf")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"nats-server"):
            continue
        if conf.encode() in argv and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def wait_until(check: Callable[[], bool]) -> None:
    """Poll a cheap check until it holds; bound it with asyncio.timeout at the call."""
    # What is polled (another process's state in /proc) has no event to wait on.
    while not check():  # noqa: ASYNC110
        await asyncio.sleep(POLL)


async def eventually(
    probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], within: float = 10.0
) -> T:
    """Call probe until accept(result) holds, within a bound; the last result on failure.

    A probe that cannot reach a node (a transport error: a node busy on a loaded machine once
    left a connection unanswered for 5 s in CI) has not seen the condition yet; it tries again.
    """
    last: T | httpx.TransportError | None = None
    try:
        async with asyncio.timeout(within):
            while True:
                try:
                    got = await probe()
                except httpx.TransportError as exc:
                    last = exc
                else:
                    if accept(got):
                        return got
                    last = got
                await asyncio.sleep(POLL)
    except TimeoutError:
        pytest.fail(f"condition not reached within {within} s; last result: {last!r}")


# The network key of the tests' nodes (tests/conftest.py gives in-process nodes the same one).
TEST_NETWORK_KEY_B64 = encode_secret(bytes(range(32)))
# What opens the sealed payloads a test reads raw from the stream.
TEST_KEYRING = Keyring([NetworkKey.of(bytes(range(32)))])


def node_env(base: dict[str, str], data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a spawned node: no inherited BZZZ_*, fast webhook retries.

    The nodes of a test share one network key, as an operator gives every node of a network.
    """
    env = dict(base)
    env.update(
        {
            "BZZZ_DATA_DIR": str(data_dir),
            "BZZZ_NETWORK_KEY": TEST_NETWORK_KEY_B64,
            "BZZZ_LOG_LEVEL": "INFO",
            "BZZZ_WEBHOOKS__INITIAL_BACKOFF": "0.2",
            "BZZZ_WEBHOOKS__MAX_BACKOFF": "0.5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@dataclass
class HttpNode:
    """A spawned `bzzz serve` (MCP over streamable HTTP) and where its output goes."""

    data_dir: Path
    env: dict[str, str]
    log_dir: Path
    port: int = field(default_factory=free_port)
    proc: asyncio.subprocess.Process | None = None
    runs: int = 0
    # Run in the child before it starts (resource limits, say): the real console script.
    preexec: Callable[[], None] | None = None
    # The real console script rather than the zygote's fork (tests about the process itself).
    real: bool = False

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:<port>."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base_url}/mcp"

    @property
    def stderr_path(self) -> Path:
        """This run's stderr."""
        return self.log_dir / f"node-{self.port}-{self.runs}.err"

    async def start(self, *, new_session: bool = False, within: float = START_TIMEOUT) -> None:
        """Spawn the node and wait (at most ``within`` s) for GET /healthz to answer 200."""
        self.runs += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (
            (self.log_dir / f"node-{self.port}-{self.runs}.out").open("wb") as out,
            self.stderr_path.open("wb") as err,
        ):
            self.proc = await asyncio.create_subprocess_exec(
                bzzz_executable(real=self.real or self.preexec is not None),
                "serve",
                "--port",
                str(self.port),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=self.env,
                start_new_session=new_session,
                preexec_fn=self.preexec,
            )
        try:
            async with asyncio.timeout(within):
                await self._wait_healthy()
        except TimeoutError:
            await self.kill()  # a node that failed to start must not outlive the test
            pytest.fail(f"bzzz serve not healthy within {within} s:\n{self.stderr_tail()}")

    async def _wait_healthy(self) -> None:
        assert self.proc is not None
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                if self.proc.returncode is not None:
                    pytest.fail(
                        f"bzzz serve exited with {self.proc.returncode}:\n{self.stderr_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    response = await client.get(f"{self.base_url}/healthz")
                    if response.status_code == 200:
                        return
                await asyncio.sleep(POLL)

    async def health(self) -> dict[str, Any]:
        """The /healthz body."""
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(f"{self.base_url}/healthz")
            body: dict[str, Any] = response.json()
            return body

    def stderr_tail(self, lines: int = 40) -> str:
        """The end of this run's stderr, for failure messages."""
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no stderr)"
        return "\n".join(text.splitlines()[-lines:])

    async def wait_exit(self, within: float = STOP_TIMEOUT) -> int:
        """The exit status, waiting at most ``within`` seconds."""
        assert self.proc is not None
        async with asyncio.timeout(within):
            return await self.proc.wait()

    def send(self, sig: signal.Signals, *, group: bool = False) -> None:
        """Send a signal to the node (or to its whole process group, as a terminal's Ctrl-C)."""
        assert self.proc is not None
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)

    async def kill(self) -> None:
        """SIGKILL the node if it still runs and reap it (cleanup; never raises)."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_TIMEOUT):
                await proc.wait()


async def bzzz_cli(env: dict[str, str], *args: str) -> str:
    """Run one `bzzz …` command to completion (bounded); its stdout, failing on an error."""
    done = await asyncio.to_thread(
        subprocess.run,
        [bzzz_executable(), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT * 3,
        check=False,
    )
    assert done.returncode == 0, f"bzzz {' '.join(args)}: {done.stderr}"
    return done.stdout


async def admit(by: HttpNode, *newcomers: HttpNode) -> None:
    """What an operator does: `bzzz identity` on each newcomer, `bzzz node admit` on ``by``."""
    for newcomer in newcomers:
        shown = json.loads(await bzzz_cli(newcomer.env, "identity", "--json"))
        await bzzz_cli(by.env, "node", "admit", shown["public_key"])


async def start_network(first: HttpNode, *others: HttpNode) -> None:
    """Start the network's first node (it admits itself), then the others, admitted by it."""
    await first.start()
    await asyncio.gather(*(node.start() for node in others))
    await admit(first, *others)


async def stored_message_ids(urls: list[str]) -> Counter[str]:
    """How often each post's message id is in the network's log (read with nats-py; with
    partitions, the log holds every partition's copies)."""
    nc = await nats.connect(urls)
    try:
        js = nc.jetstream(timeout=10)
        sub = await js.subscribe(
            "bzzz.main.p.*.msg.>", stream=stream_name("main"), ordered_consumer=True
        )
        seen: Counter[str] = Counter()
        while True:
            msg = await sub.next_msg(timeout=10)
            # The stream holds sealed payloads: open them with the test network's key.
            envelope = opened_fields(msg.data, TEST_KEYRING)
            assert envelope is not None, msg.data[:200]
            seen[envelope["payload"]["message_id"]] += 1
            if msg.metadata.num_pending == 0:
                return seen
    finally:
        await nc.close()


def kill_orphans(data_dir: Path) -> None:
    """Last-resort cleanup: SIGKILL any nats-server still serving data_dir."""
    for pid in nats_servers_of(data_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- MCP clients -------------------------------------------------------------------------------


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool; the structured result, failing the test on an error result."""
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await session.call_tool(tool, arguments)
    body = result.structured_content
    assert body is not None, f"{tool} returned no structured content: {result.content}"
    assert not result.is_error, f"{tool}({arguments}) failed: {body}"
    assert body["success"] is True, body
    return dict(body)


async def call_error(
    session: ClientSession, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """Call a tool that must fail; the structured ErrorResponse."""
    async with asyncio.timeout(CALL_TIMEOUT):
        result = await session.call_tool(tool, arguments)
    body = result.structured_content
    assert result.is_error, f"{tool}({arguments}) should have failed: {body}"
    assert body is not None and body["success"] is False, body
    return dict(body)


@contextlib.asynccontextmanager
async def http_session(
    url: str, *, terminate_on_close: bool = True, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session over streamable HTTP (with ``headers``, if given)."""
    async with contextlib.AsyncExitStack() as stack:
        http = None
        if headers:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT)
            )
        read, write = await stack.enter_async_context(
            streamable_http_client(url, http_client=http, terminate_on_close=terminate_on_close)
        )
        session = await stack.enter_async_context(ClientSession(read, write))
        async with asyncio.timeout(CALL_TIMEOUT):
            await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def stdio_session(env: dict[str, str], errlog: TextIO) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session to a spawned `bzzz serve --stdio`."""
    params = StdioServerParameters(command=bzzz_executable(), args=["serve", "--stdio"], env=env)
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        async with asyncio.timeout(START_TIMEOUT):
            await session.initialize()
        yield session


# --- webhook receiver --------------------------------------------------------------------------


@dataclass
class Attempt:
    """One request the receiver got, and what it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    def json(self) -> dict[str, Any]:
        """The body as JSON."""
        value: dict[str, Any] = json.loads(self.body)
        return value


def signature_valid(secret: str, header: str, body: bytes, tolerance: float = 300.0) -> bool:
    """Check ``t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`` independently of bzzz."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
        given = fields["v1"]
    except (ValueError, KeyError):
        return False
    if abs(time.time() - timestamp) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(expected.hexdigest(), given)


class WebhookReceiver:
    """An HTTP/1.1 server on 127.0.0.1 that records requests; the first ``fail_first`` get 500."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.attempts: list[Attempt] = []
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> int:
        """Listen (on ``port``, or a free one); the port."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def url(self) -> str:
        """Where to POST."""
        return f"http://127.0.0.1:{self.port}/hook"

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self._server.wait_closed()
            self._server = None

    async def wait_for(self, accept: Callable[[list[Attempt]], bool], within: float) -> None:
        """Wait until accept(attempts) holds, bounded."""
        try:
            async with asyncio.timeout(within):
                while not accept(self.attempts):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            pytest.fail(f"webhook receiver: condition not met in {within} s: {self.attempts!r}")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _version = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
            status = 500 if len(self.attempts) < self.fail_first else 200
            self.attempts.append(Attempt(method, path, headers, body, status))
            reason = "OK" if status == 200 else "Internal Server Error"
            writer.write(
                f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            self._changed.set()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
