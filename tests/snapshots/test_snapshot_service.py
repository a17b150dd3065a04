"""Snapshots on the in-memory bus: a new node starts from one and ends where a replay ends.

Node A plays agents, posts, a task and a thread, writes a snapshot, plays on; node B starts on
an empty store from the snapshot, node C (``snapshots.load`` off) replays the whole log; the
three stores then hold the same rows. A snapshot of an unadmitted writer, one whose body or
header was altered, and one of another project set are refused, and the node replays.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest

from bzzz.config import Settings, load_settings
from bzzz.eventlog import Caller
from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.network.snapshots import read_header, seal_snapshot
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Principal, Scope
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput
from bzzz.store import snapshot as rows

WAIT = 10.0


def _settings(tmp_path: Path, name: str, **snapshots: Any) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name)},
            "conversation": {"escalation_rules": []},
            "snapshots": {"every": 0, **snapshots},
        },
    )


async def _play(node: Node, tag: str) -> None:
    caller = Caller(f"session-{tag}", LOCAL)
    lead, peer = f"lead-{tag}", f"peer-{tag}"
    for agent in (lead, peer):
        await node.agents.announce(caller, AnnounceInput(agent_id=agent, role="dev", project="p1"))
    post = node.conversations.post
    await post(
        caller,
        PostInput(
            agent_id=lead,
            target_address=f"bzzz://{peer}",
            message_type="note",
            content={"text": f"secret note {tag}"},
        ),
    )
    await post(
        caller,
        PostInput(
            agent_id=lead,
            target_address=f"bzzz://{peer}",
            message_type="task_assignment",
            content={"task_type": "code_review", "description": f"review {tag}"},
        ),
    )
    created = await node.conversations.thread(
        caller,
        ThreadInput(action="create", agent_id=lead, topic=f"design {tag}", participants=[peer]),
    )
    thread_id = created["thread"]["id"] if "thread" in created else created["thread_id"]
    await post(
        caller,
        PostInput(agent_id=peer, thread_id=thread_id, message_type="text", content={"text": "ok"}),
    )


async def state(node: Node) -> dict[str, list[dict[str, Any]]]:
    """A node's snapshot rows (what a snapshot would hold), without when each was applied."""
    dumped = await rows.dump(node.db)
    found = rows.rows_of(dumped.packed)
    for row in found["applied_envelopes"]:
        row.pop("applied_at")
    return found


async def settled(bus: InMemoryBus, *nodes: Node) -> None:
    """Every node has applied the whole log (which stops growing)."""
    while True:
        last = await bus.last_sequence()
        for node in nodes:
            await node.projector.wait_for_sequence(last, WAIT)
        if await bus.last_sequence() == last:
            return


async def test_a_new_node_starts_from_a_snapshot_and_ends_as_a_replay(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "a"), bus=bus) as a:
        await _play(a, "before")
        written = await a.snapshots.write(LOCAL)
        assert written["covers"] == "*" and written["sequence"] > 0 and written["rows"] > 0
        await _play(a, "after")
        async with (
            Node(_settings(tmp_path, "b"), bus=bus) as b,
            Node(_settings(tmp_path, "c", load=False), bus=bus) as c,
        ):
            from_snapshot = b.status()["snapshots"]["projects"]["*"]
            assert from_snapshot["start"] == "snapshot"
            assert from_snapshot["sequence"] == written["sequence"]
            replayed = c.status()["snapshots"]["projects"]["*"]
            assert replayed["start"] == "replay" and "sequence" not in replayed
            # B applied only what came after the snapshot; C applied all of it.
            assert 0 < from_snapshot["replayed"] < replayed["replayed"]
            await settled(bus, a, b, c)
            held_by_a, held_by_b, held_by_c = await state(a), await state(b), await state(c)
            assert held_by_b == held_by_c
            assert held_by_a == held_by_c
            assert {"lead-before", "lead-after"} <= {r["id"] for r in held_by_b["agents"]}
            notes = [m["content"] for m in held_by_b["messages"] if m["sender"] == "lead-before"]
            assert {"text": "secret note before"} in notes
            # The loaded rows are sealed in B's store as its own writes are, not in clear.
            assert await stored_in_clear(b) == []
            assert await stored_in_clear(c) == []


async def stored_in_clear(node: Node) -> list[str]:
    """Content values of a node's store that are not sealed boxes (none when all are)."""
    query = (
        "SELECT content FROM messages UNION ALL SELECT summary FROM activity"
        " UNION ALL SELECT topic FROM threads UNION ALL SELECT description FROM tasks"
    )
    async with node.db.engine.connect() as connection:
        found = [row[0] for row in (await connection.exec_driver_sql(query)).all()]
    assert len(found) > 8
    return [value for value in found if not str(value).lstrip('"').startswith("bz1.")]


async def test_the_snapshot_in_the_object_store_is_sealed(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "a"), bus=bus) as a:
        await _play(a, "sealed")
        await a.snapshots.write(LOCAL)
    data, hint = bus.snapshots.objects["snapshot.*"]
    header, _, body = read_header(data)
    assert header["key_id"] == a.keyring.current.id if a.keyring else False
    assert b"secret note" not in data and b"review sealed" not in data
    assert body.startswith(b"bz1.")
    assert hint.sequence == header["sequence"] and hint.writer == a.node_id


async def _refused_with(tmp_path: Path, bus: InMemoryBus, reason: str, tag: str = "") -> None:
    async with Node(_settings(tmp_path, f"new-{reason}{tag}"), bus=bus) as fresh:
        shown = fresh.status()["snapshots"]
        assert shown["projects"]["*"]["start"] == "replay"
        assert shown["refused"] == {reason: 1}
        agents = {r["id"] for r in (await state(fresh))["agents"]}
        assert "lead-x" in agents  # the replay got there all the same
    # Nothing of the refused file is left beside the store.
    assert not list((tmp_path / f"new-{reason}{tag}").glob(".bzzz-snapshot-*"))


async def test_a_forged_or_unadmitted_snapshot_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "a"), bus=bus) as a:
        await _play(a, "x")
        await a.snapshots.write(LOCAL)
        keyring = a.keyring
    good, hint = bus.snapshots.objects["snapshot.*"]
    header, sig, body = read_header(good)

    # Signed by a node the network never admitted.
    dumped = rows.Dumped(header["sequence"], b"", 0)
    stranger = NodeIdentity.generate()
    forged = seal_snapshot(stranger, "main", "*", dumped.sequence, dumped.packed, 0, keyring)
    bus.snapshots.objects["snapshot.*"] = (forged, hint)
    await _refused_with(tmp_path, bus, "not_admitted")

    # The admitted writer's header over another body.
    bus.snapshots.objects["snapshot.*"] = (good[: -len(body)] + body[:-8] + b"AAAAAAAA", hint)
    await _refused_with(tmp_path, bus, "bad_hash")

    # The header changed after it was signed.
    changed = json.dumps({"header": header | {"sequence": 1}, "sig": sig}).encode()
    bus.snapshots.objects["snapshot.*"] = (changed + b"\n" + body, hint)
    await _refused_with(tmp_path, bus, "bad_signature")

    # The admitted writer's key over what is no dump of a store, and over another set's rows.
    writer = NodeIdentity.load_or_create(tmp_path / "a")
    assert writer.node_id == header["writer"]
    junk = seal_snapshot(writer, "main", "*", header["sequence"], b"not a dump", 1, keyring)
    bus.snapshots.objects["snapshot.*"] = (junk, hint)
    await _refused_with(tmp_path, bus, "malformed")
    for index, schema in enumerate(_foreign_schemas(header["sequence"])):
        packed = _packed_database(tmp_path / "crafted.db", schema)
        crafted = seal_snapshot(writer, "main", "*", header["sequence"], packed, 1, keyring)
        bus.snapshots.objects["snapshot.*"] = (crafted, hint)
        await _refused_with(tmp_path, bus, "malformed", f"-{index}")
    # A body that would expand past its bound (here 100 MB of zeros in 100 KB) is not written.
    bomb = zlib.compress(bytes(100 << 20), 9)
    crafted = seal_snapshot(writer, "main", "*", header["sequence"], bomb, 1, keyring)
    bus.snapshots.objects["snapshot.*"] = (crafted, hint)
    await _refused_with(tmp_path, bus, "malformed", "-bomb")
    assert "expands past" in caplog.text
    other = seal_snapshot(writer, "main", "p9", header["sequence"], b"", 0, keyring)
    bus.snapshots.objects["snapshot.*"] = (other, hint)
    await _refused_with(tmp_path, bus, "wrong_projects")

    # The control: the same hand-made file with its one value of the right type is loaded.
    tables, applied = _foreign_schemas(header["sequence"])[-1].split("; ", 1)
    control = applied.replace("x'00'", "'{}'")
    packed = _packed_database(tmp_path / "crafted.db", f"{tables}; {control}")
    bus.snapshots.objects["snapshot.*"] = (
        seal_snapshot(writer, "main", "*", header["sequence"], packed, 1, keyring),
        hint,
    )
    async with Node(_settings(tmp_path, "control"), bus=bus) as fresh:
        shown = fresh.status()["snapshots"]
        assert shown["refused"] == {} and shown["loaded"]["rows"] == 1


def _foreign_schemas(sequence: int) -> list[str]:
    """SQLite databases that are no dump of this store at ``sequence``: another table, a view
    in a table's place (its SQL would run as the load reads it), a table with a column the
    store lacks, the store's tables with a trigger, the store's tables empty (no applied
    envelope at the header's sequence), a value of another type than its column's."""
    tables = ";".join(rows._file_ddl().values())  # the file's own schema
    applied = (
        "INSERT INTO applied_envelopes VALUES ('e1', {seq}, 't', 'o', {outcome}, "
        "'2026-12-04 00:00:00.000000')"
    )
    return [
        "CREATE TABLE passwords (who TEXT, secret TEXT)",
        "CREATE TABLE x (id TEXT); CREATE VIEW agents AS SELECT id FROM x",
        "CREATE TABLE agents (id TEXT PRIMARY KEY, is_admin INTEGER)",
        f"{tables}; CREATE TRIGGER t AFTER INSERT ON agents BEGIN DELETE FROM agents; END",
        tables,
        f"{tables}; {applied.format(seq=sequence, outcome='x' + repr('00'))}",
    ]


def _packed_database(path: Path, schema: str) -> bytes:
    path.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.executescript(schema)
    return zlib.compress(path.read_bytes())


async def test_a_node_loads_only_the_snapshot_of_its_own_projects(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "a"), bus=bus) as a:
        await _play(a, "x")
        await a.snapshots.write(LOCAL)
    one = _settings(tmp_path, "one")
    one.bzzz.projects = ["p1"]
    async with Node(one, bus=bus) as p1:
        shown = p1.status()["snapshots"]
        assert shown["covers"] == "p1" and shown["refused"] == {}
        assert list(shown["projects"]) == ["p1"]
        assert shown["projects"]["p1"]["start"] == "replay"


def _principal(scope: Scope, project: str) -> Principal:
    return Principal("someone", "token", frozenset({project}), frozenset(), scope)


async def test_writing_a_snapshot_needs_an_admin_of_every_project(tmp_path: Path) -> None:
    from bzzz.errors import InvalidParameters, PermissionDenied

    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "a"), bus=bus) as a:
        writer = _principal(Scope.WRITE, "*")
        with pytest.raises(PermissionDenied):
            await a.snapshots.write(writer)
        one = _principal(Scope.ADMIN, "p1")
        with pytest.raises(PermissionDenied):
            await a.snapshots.write(one)
        assert a.snapshots.written == 0
    single = _settings(tmp_path, "single")
    single.bzzz.projects = ["p1"]
    async with Node(single, bus=InMemoryBus()) as p1:
        with pytest.raises(InvalidParameters):
            await p1.snapshots.write(LOCAL, "p2")
        assert (await p1.snapshots.write(one, "p1"))["covers"] == "p1"


async def test_snapshots_are_written_every_n_envelopes(tmp_path: Path) -> None:
    bus = InMemoryBus()
    async with Node(_settings(tmp_path, "a", every=5, min_seconds=0), bus=bus) as a:
        await _play(a, "auto")
        await a.snapshots.wait_written(1, WAIT)
        assert bus.snapshots.objects["snapshot.*"][1].writer == a.node_id


async def test_a_node_leaves_out_its_turn_when_another_of_its_set_wrote_since(
    tmp_path: Path,
) -> None:
    bus = InMemoryBus()
    async with (
        Node(_settings(tmp_path, "a"), bus=bus) as a,
        Node(_settings(tmp_path, "b", min_seconds=0), bus=bus) as b,
    ):
        await _play(a, "one")
        await settled(bus, a, b)
        first = await a.snapshots.write(LOCAL)
        # B's turn comes with the next envelope: A's snapshot is newer than B's last, so B
        # leaves it out and counts again from there.
        b.snapshots.settings.every = 1
        await a.agents.announce(
            Caller("s", LOCAL), AnnounceInput(agent_id="late-1", role="dev", project="p1")
        )
        await b.snapshots.wait_written(0, WAIT, skipped=1)
        assert b.snapshots.written == 0
        assert bus.snapshots.objects["snapshot.*"][1].writer == a.node_id
        # The next turn is B's own: nothing newer than what it counted from.
        await a.agents.announce(
            Caller("s", LOCAL), AnnounceInput(agent_id="late-2", role="dev", project="p1")
        )
        await b.snapshots.wait_written(1, WAIT, skipped=1)
        hint = bus.snapshots.objects["snapshot.*"][1]
        assert hint.writer == b.node_id and hint.sequence > first["sequence"]
        assert b.status()["snapshots"]["skipped"] == 1
