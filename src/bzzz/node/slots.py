"""The node's data directory: the slot each local process holds in it, and the node's secrets.

Several local processes may share one data directory (one network): each claims a slot with its
own identity, database and durable consumer (``claim_slot``).
"""

from __future__ import annotations

import fcntl
import os
import secrets
from pathlib import Path
from typing import IO

from bzzz.errors import NetworkError

MAX_SLOTS = 64


def claim_slot(data_dir: Path) -> tuple[Path, IO[bytes], int]:
    """Take the first free node slot of a data directory: (node dir, held lock, slot number).

    Several local processes may share one data directory (one network); each needs its own
    identity, database and durable consumer, so each holds a slot. Slot 0 is the directory.
    """
    slots = data_dir / "slots"
    slots.mkdir(mode=0o700, parents=True, exist_ok=True)
    slots.chmod(0o700)
    for n in range(MAX_SLOTS):
        handle = os.fdopen(os.open(slots / f"{n}.lock", os.O_WRONLY | os.O_CREAT, 0o600), "ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        node_dir = data_dir if n == 0 else slots / str(n)
        node_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return node_dir, handle, n
    raise NetworkError(f"more than {MAX_SLOTS} bzzz processes share {data_dir}")


def load_secret(path: Path) -> bytes:
    """The secret kept at ``path`` (32 random bytes, made once, mode 0600)."""
    if path.exists():
        return path.read_bytes()
    value = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(value)
    return value
