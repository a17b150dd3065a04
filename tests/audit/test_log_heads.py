"""`bzzz audit verify` checks the chain against the signed heads on the log, not only the store's.

Someone with the disk rewrites the node's chain (every hash from the edited record on made
consistent again) and deletes the local ``audit_heads`` rows: the heads the node signed and
published on the log still name the records as they were.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from access.support import bzzz_cli, cli_env

from bzzz.audit.records import Action, Record, chain, digest, stamp
from bzzz.config import load_settings
from bzzz.domain import utcnow
from bzzz.node.core import Node

pytestmark = pytest.mark.integration


def _action(n: int) -> Action:
    return Action(
        at=stamp(utcnow()),
        principal="local",
        session="test",
        action=f"tool:step-{n}",
        outcome="ok",
        digest=digest({"n": n}),
    )


async def _signed_trail(data_dir: Path) -> str:
    """A node on its embedded server signs heads at 4 and 8 (and on its clean stop)."""
    settings = load_settings(environ={}, overrides={"node": {"data_dir": str(data_dir)}})
    async with Node(settings) as node:
        for n in range(1, 9):
            node.audit.record(_action(n))
            if n % 4 == 0:
                await node.audit.flush()
                assert await node.audit.publish_head()
        return node.node_id


def _rewrite(db_file: Path, node_id: str, from_seq: int) -> None:
    """Edit record ``from_seq`` and chain every later one to it again; drop the local heads."""
    connection = sqlite3.connect(db_file)
    try:
        columns = [
            "node_id", "seq", "prev_hash", "hash", "at", "principal", "agent", "session",
            "action", "target", "outcome", "digest",
        ]  # fmt: skip
        rows = connection.execute(
            f"SELECT {', '.join(columns)} FROM audit_records WHERE node_id=? ORDER BY seq",
            (node_id,),
        ).fetchall()
        records = [Record(*row) for row in rows]
        prev = records[from_seq - 2].hash
        for record in records[from_seq - 1 :]:
            action = "tool:innocent" if record.seq == from_seq else record.action
            new = chain(
                node_id,
                record.seq,
                prev,
                Action(record.at, record.principal, record.session, action, record.outcome,
                       record.digest, record.agent, record.target),
            )  # fmt: skip
            connection.execute(
                "UPDATE audit_records SET prev_hash=?, hash=?, action=? WHERE node_id=? AND seq=?",
                (new.prev_hash, new.hash, new.action, node_id, new.seq),
            )
            prev = new.hash
        connection.execute("DELETE FROM audit_heads")
        connection.commit()
    finally:
        connection.close()


async def test_a_rewritten_chain_with_its_local_heads_deleted_is_reported(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    node_id = await _signed_trail(data_dir)
    env = cli_env(clean_env, data_dir)
    intact = bzzz_cli(env, "audit", "verify", "--json")
    assert intact.returncode == 0, intact.stdout + intact.stderr

    _rewrite(data_dir / "bzzz.db", node_id, from_seq=3)

    done = bzzz_cli(env, "audit", "verify", "--json")
    assert done.returncode == 3, done.stdout + done.stderr
    shown = json.loads(done.stdout)
    assert shown["intact"] is False
    problems = shown["nodes"][node_id]["problems"]
    # The chain itself holds together; the first record a signed head names differently is 4.
    assert problems[0] == {
        "kind": "head_mismatch",
        "seq": 4,
        "node_id": node_id,
        "message": "record 4 differs from the head the node signed (history rewritten)",
    }
    assert {p["kind"] for p in problems} == {"head_mismatch"}
    text = bzzz_cli(env, "audit", "verify")
    assert text.returncode == 3
    assert "head_mismatch: record 4 differs from the head the node signed" in text.stdout


async def test_a_chain_cut_short_with_its_local_heads_deleted_names_the_missing_record(
    data_dir: Path, clean_env: dict[str, str]
) -> None:
    node_id = await _signed_trail(data_dir)
    connection = sqlite3.connect(data_dir / "bzzz.db")
    try:
        connection.execute("DELETE FROM audit_records WHERE seq > 6")
        connection.execute("DELETE FROM audit_heads")
        connection.commit()
    finally:
        connection.close()

    done = bzzz_cli(cli_env(clean_env, data_dir), "audit", "verify", "--json")

    assert done.returncode == 3, done.stdout + done.stderr
    [first, *_] = json.loads(done.stdout)["nodes"][node_id]["problems"]
    assert (first["kind"], first["seq"]) == ("head_missing", 8)
    assert first["message"] == "record 8 named by a signed head is missing (the chain ends at 6)"
