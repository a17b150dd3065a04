"""A pre-imported `bzzz` for the suite: forks a ready interpreter instead of starting one.

A `bzzz` process spends ~4 s of CPU on this machine importing what a node needs (the MCP SDK,
SQLAlchemy, pydantic models) before it does anything; the suite starts hundreds of them. This
server imports them once per test process, then, for each request of the launcher
(``tests/bzzz_launcher.py``), forks a child that runs ``bzzz.cli.main`` with the launcher's
arguments, environment, working directory and standard streams. The code the child runs is the
command's own, from its ``main`` on; only the interpreter's start is shared.

The launcher is what the tests see (its pid, its signals, its exit status): it passes its
signals on to the child, and exits as the child did. A SIGKILL of the launcher closes the
"life" pipe the child watches, and the child SIGKILLs itself. Tests about the process itself
(``bzzz_executable(real=True)``) start the real console script.

Run as ``python tests/zygote.py SOCKET``; it prints ``ready`` once listening and exits when
its standard input closes (the test process that started it has gone).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import selectors
import signal
import socket
import sys
import threading
from typing import Any

# What `bzzz serve` and the CLI commands import; a module missing here is imported by the
# child itself (slower, still correct).
PRELOAD = (
    "bzzz.cli",
    "bzzz.cli.serve",
    "bzzz.api.app",
    "bzzz.node",
    "bzzz.mcp.server",
    "bzzz.mcp.stdio",
    "bzzz.store.database",
    "bzzz.network.jetstream",
    "bzzz.network.embedded",
    "uvicorn",
    "uvloop",
)
MAX_FDS = 4
REQUEST_MAX = 1 << 20


def _preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # Every cli_* command module, so each command forks ready.
    import bzzz

    for entry in sorted(os.listdir(os.path.dirname(bzzz.__file__))):
        if entry.startswith("cli_") and entry.endswith(".py"):
            with contextlib.suppress(ImportError):
                importlib.import_module(f"bzzz.{entry[:-3]}")


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request: a JSON line and the launcher's fds (stdin, stdout, stderr, life)."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        chunk, ancdata, _flags, _addr = conn.recvmsg(
            REQUEST_MAX, socket.CMSG_LEN(MAX_FDS * fds.itemsize)
        )
        if not chunk:
            raise ConnectionError("the launcher went away")
        data += chunk
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return json.loads(data), list(fds)


def _std_streams(env: dict[str, str]) -> None:
    """New sys.stdin/stdout/stderr over fds 0-2, buffered as a fresh interpreter's would be."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))

    def text(fd: int, mode: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        tty = raw.isatty()
        if mode == "r":
            return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", line_buffering=tty)
        buffered = io.BufferedWriter(raw)
        errors = "backslashreplace" if fd == 2 else "strict"
        return io.TextIOWrapper(
            buffered,
            encoding="utf-8",
            errors=errors,
            line_buffering=tty or fd == 2,
            write_through=unbuffered or fd == 2,
        )

    sys.stdin, sys.stdout, sys.stderr = text(0, "r"), text(1, "w"), text(2, "w")
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _watch_life(fd: int) -> None:
    """SIGKILL this process once the launcher's end of the life pipe closes."""

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 1):
                pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="bzzz-zygote-life", daemon=True).start()


def _child(request: dict[str, Any], fds: list[int], keep: list[int]) -> None:
    """In the fork: become the command the launcher asked for; never returns."""
    code: int = 1
    try:
        for fd in keep:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        stdin, stdout, stderr, life = fds
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
        for fd in (stdin, stdout, stderr):
            if fd > 2:
                os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        _std_streams(request["env"])
        _watch_life(life)
        sys.argv = list(request["argv"])
        from bzzz.cli import main

        try:
            code = main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    except BaseException as exc:  # a child must never return into the server
        with contextlib.suppress(Exception):
            os.write(2, f"bzzz zygote child: {exc!r}\n".encode())
        code = 1
    finally:
        os._exit(code)


def _status_line(status: int) -> bytes:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}\n".encode()
    return f"exit {os.waitstatus_to_exitcode(status)}\n".encode()


class Zygote:
    """The server: a listening socket, the children it forked, the connection of each."""

    def __init__(self, path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.waiting: dict[int, socket.socket] = {}

    def run(self) -> None:
        """Serve until standard input closes."""
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, self.start_one)
        selector.register(self.wake_r, selectors.EVENT_READ, self.reap)
        selector.register(sys.stdin, selectors.EVENT_READ, None)
        print("ready", flush=True)
        while True:
            for key, _ in selector.select():
                if key.data is None:
                    if not os.read(sys.stdin.fileno(), 4096):
                        return
                else:
                    key.data()

    def start_one(self) -> None:
        """Accept a launcher, fork its command, answer with the child's pid."""
        conn, _ = self.listener.accept()
        try:
            request, fds = _receive(conn)
        except (ConnectionError, ValueError, OSError):
            conn.close()
            return
        keep = [self.listener.fileno(), self.wake_r, self.wake_w, conn.fileno()]
        keep += [sys.stdin.fileno(), *(c.fileno() for c in self.waiting.values())]
        pid = os.fork()
        if pid == 0:
            _child(request, fds, keep)
        for fd in fds:
            os.close(fd)
        self.waiting[pid] = conn
        with contextlib.suppress(OSError):
            conn.sendall(f"pid {pid}\n".encode())

    def reap(self) -> None:
        """Tell each ended child's launcher how it ended."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.wake_r, 4096)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(_status_line(status))
                conn.close()


def serve(path: str) -> None:
    """Import what `bzzz` needs, then fork a command per launcher's request."""
    _preload()
    gc.collect()
    gc.freeze()  # what was imported stays shared with the children (copy-on-write)
    Zygote(path).run()


if __name__ == "__main__":
    serve(sys.argv[1])
