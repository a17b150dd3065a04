"""The `bzzz` the suite starts: asks the zygote (``tests/zygote.py``) to fork the command.

Run as ``python -S launcher.py SOCKET [bzzz arguments…]`` (``bzzz_executable()`` writes a
script that does). It hands the zygote its arguments, environment, working directory and
standard streams, then stands in for the command: the signals it gets go to the child, and it
exits with the child's status (or dies of the child's signal). Only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    life_r, _life_w = os.pipe()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    umask = os.umask(0)
    os.umask(umask)
    request = {"argv": ["bzzz", *argv], "env": dict(os.environ), "cwd": os.getcwd(), "umask": umask}
    line = json.dumps(request).encode() + b"\n"
    socket.send_fds(sock, [line], [0, 1, 2, life_r])
    os.close(life_r)
    reader = sock.makefile("rb")
    first = reader.readline().split()
    if len(first) != 2 or first[0] != b"pid":
        sys.stderr.write("bzzz launcher: the zygote did not start the command\n")
        sys.exit(1)
    child = int(first[1])

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, sig)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            end = reader.readline().split()
            break
        except InterruptedError:
            continue
    if len(end) != 2:
        os.kill(child, signal.SIGKILL)
        sys.exit(1)
    kind, value = end[0], int(end[1])
    if kind == b"signal":
        signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
    os._exit(value & 0xFF)


if __name__ == "__main__":
    main()
