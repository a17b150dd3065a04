"""Ports for the servers the tests spawn, out of the way of the kernel's own choices.

A port picked by binding port 0 comes from the kernel's ephemeral range, the range it also gives to
every other ``bind(0)`` and every outgoing connection on the machine. Between the moment the picker
closes its socket and the moment the spawned server binds the port, another worker's nats-server or
HTTP client can take it ("Address already in use", seen in CI with four workers). So the picker
hands out ports below that range, from a block of its own per pytest-xdist worker, in turn,
skipping any port something already listens on.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator

BLOCK = 2_000
FIRST = 20_000  # the kernel's ephemeral range starts at 32,768 (ip_local_port_range)


def _worker_index() -> int:
    """0 for gw0 (or no xdist), 1 for gw1, …"""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw") or 0)


def _block() -> Iterator[int]:
    start = FIRST + (_worker_index() % 6) * BLOCK
    return itertools.cycle(range(start, start + BLOCK))


_ports = _block()


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now and that no other worker hands out."""
    for _ in range(BLOCK):
        port = next(_ports)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port in this worker's block of {BLOCK}")
