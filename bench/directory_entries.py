"""What signing and verifying the agent directory's entries cost (issue 32).

Every entry a node writes is signed (Ed25519 over the bucket, the key and the entry) and every
entry a node reads — a watched view of a project, a batched direct get — is verified before
it is taken. This times, in one process, per entry: the unsigned JSON a reader parsed before,
a signed entry written (``encode``) and read (``read``: size, parse, signer admitted,
signature, fields), and the refusal of a value that is not an entry (unsigned, oversized,
forged), which an attacker controls.

    .venv/bin/python bench/directory_entries.py [--entries 10000]

Prints the figures and writes bench/results/directory_entries.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchutil import code_version, machine
from bzzz import domain
from bzzz.network.directory import (
    MAX_ENTRY_BYTES,
    EntryRejected,
    directory_bucket,
    encode,
    entry_key,
    read,
)
from bzzz.network.identity import NodeIdentity

RESULTS = Path(__file__).resolve().parent / "results"
BUCKET = directory_bucket("bench")


class _Admitted:
    """The signers check as a node makes it: a dict lookup of the admitted keys."""

    def __init__(self, keys: set[str]) -> None:
        self._keys = keys
        self.changes = 0

    def admits(self, public_key: str, node_id: str) -> bool:
        return public_key in self._keys


def _agent(n: int, node_id: str) -> domain.Agent:
    now = datetime.now(UTC)
    return domain.Agent(
        id=f"agent-{n:05d}",
        role="developer",
        capabilities=["python", "rust", "sql"][: 1 + n % 3],
        specialization="backend services" if n % 5 == 0 else None,
        max_tasks=3,
        project="p2",
        task=None,
        status="online",
        active_tasks=n % 3,
        tasks_completed=n,
        tasks_failed=0,
        performance=0.9,
        node_id=node_id,
        session_id="",
        created_at=now,
        last_activity=now,
    )


def _per_entry_us(work: Callable[[], object], count: int) -> float:
    started = time.perf_counter()
    work()
    return round((time.perf_counter() - started) / count * 1e6, 2)


def run(count: int) -> dict[str, Any]:
    writer = NodeIdentity.generate()
    signers = _Admitted({writer.public_key_b64})
    agents = [_agent(n, writer.node_id) for n in range(count)]
    keys = [entry_key(a.project, a.id) for a in agents]
    signed: list[bytes] = []
    figures: dict[str, Any] = {"entries": count}
    figures["write_signed_us"] = _per_entry_us(
        lambda: signed.extend(encode(a, writer, BUCKET, 120.0) for a in agents), count
    )
    plain = [json.dumps(json.loads(v)["e"]).encode() for v in signed]
    figures["read_unsigned_json_us"] = _per_entry_us(lambda: [json.loads(v) for v in plain], count)
    figures["read_verified_us"] = _per_entry_us(
        lambda: [read(BUCKET, k, v, signers) for k, v in zip(keys, signed, strict=True)], count
    )
    figures["entry_bytes_signed"] = round(sum(map(len, signed)) / count)
    figures["entry_bytes_unsigned"] = round(sum(map(len, plain)) / count)
    rogue = NodeIdentity.generate()
    bad = {
        "unsigned": plain[0],
        "oversized": b" " * (MAX_ENTRY_BYTES + 1),
        "not_admitted": encode(agents[0], rogue, BUCKET),
        "forged": signed[1],  # agent-00001's entry under agent-00000's key
    }
    for reason, value in bad.items():
        figures[f"refuse_{reason}_us"] = _per_entry_us(
            lambda value=value: [_refused(keys[0], value, signers) for _ in range(count)], count
        )
    return figures


def _refused(key: str, value: bytes, signers: _Admitted) -> str:
    try:
        read(BUCKET, key, value, signers)
    except EntryRejected as exc:
        return exc.reason
    raise AssertionError("taken")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    args = parser.parse_args()
    figures = run(args.entries)
    report = {"machine": machine(), "code": code_version(), "figures": figures}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "directory_entries.json").write_text(json.dumps(report, indent=2) + "\n")
    for name, value in figures.items():
        sys.stdout.write(f"{name}: {value}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
