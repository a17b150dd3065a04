"""The projector's SQLite write path: rows written on the driver's cursor read back as Core's do."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from bzzz.store import database as database_module
from bzzz.store.batch import (
    _APPLIED_OF,
    _COMPILED,
    _MESSAGES_OF,
    _TOUCH_AGENT,
    _insert_of,
    _rows_with_ids,
    execute_many,
)
from bzzz.store.database import Database, StoreError
from bzzz.store.models import AgentRow, AppliedEnvelope, MessageRow

from .support import message_row, sqlite_store

WHEN = datetime(2026, 11, 30, 19, 7, 51, 842569, tzinfo=UTC)


def _message(message_id: str) -> dict[str, Any]:
    return message_row(
        message_id, content={"text": "héllo", "n": [1, 2.5, None, True]}, posted_at=WHEN
    )


async def _insert(db: Database, rows: list[dict[str, Any]]) -> None:
    await db.write(lambda s: execute_many(s.connection(), _insert_of(MessageRow), rows))


async def _stored(db: Database, table: str) -> dict[str, list[tuple[str, Any]]]:
    """Each row of ``table`` as SQLite holds it: (storage class, raw value) per column."""

    def read(session: Session) -> dict[str, list[tuple[str, Any]]]:
        connection = session.connection()
        columns = [row[1] for row in connection.exec_driver_sql(f"PRAGMA table_info({table})")]
        listed = ", ".join(f"typeof({c}), {c}" for c in columns)
        rows = connection.exec_driver_sql(f"SELECT {listed} FROM {table}").all()
        return {str(row[1]): [(row[i], row[i + 1]) for i in range(0, len(row), 2)] for row in rows}

    return await db.write(read)


def _compiled(statement: Any, keys: tuple[str, ...]) -> Any:
    """The driver-path compilation of ``statement`` for ``keys`` (on any dialect)."""
    found = [c for (st, ks, _), c in _COMPILED.items() if (st, ks) == (statement, keys)]
    assert found, "never compiled"
    return found[0]


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with sqlite_store(tmp_path / "store.db") as database:
        yield database


async def test_driver_rows_are_stored_as_core_stores_them(db: Database) -> None:
    statement = _insert_of(MessageRow)

    def write(session: Session) -> None:
        connection = session.connection()
        execute_many(connection, statement, [_message("raw-1")])
        connection.execute(insert(MessageRow.__table__), [_message("core-1")])

    await db.write(write)
    # The row really went the driver's way, not Core's.
    assert _compiled(statement, tuple(_message("raw-1"))) is not None
    stored = await _stored(db, "messages")
    raw, core = stored["raw-1"], stored["core-1"]
    assert raw[1:] == core[1:]  # storage class and text of every column but the id
    columns = dict(zip(_message("x"), raw, strict=True))
    assert columns["posted_at"] == ("text", "2026-11-30 19:07:51.842569")
    assert columns["content"][0] == "text"
    assert json.loads(columns["content"][1]) == {"text": "héllo", "n": [1, 2.5, None, True]}
    assert columns["thread_id"] == ("null", None)


async def test_activity_updates_are_stored_as_core_stores_them(db: Database) -> None:
    agent = {
        "id": "a1",
        "role": "dev",
        "capabilities": [],
        "specialization": None,
        "max_tasks": 3,
        "project": None,
        "task": None,
        "status": "online",
        "active_tasks": 0,
        "tasks_completed": 0,
        "tasks_failed": 0,
        "performance": 0.9,
        "node_id": "node-a",
        "session_id": "s1",
        "created_at": WHEN,
        "last_activity": WHEN,
        "metadata_": {},
    }
    later = datetime(2026, 12, 1, 1, 2, 3, 4, tzinfo=timezone(timedelta(hours=5, minutes=30)))

    def write(session: Session) -> None:
        connection = session.connection()
        connection.execute(insert(AgentRow.__table__), [agent, agent | {"id": "a2"}])
        execute_many(connection, _TOUCH_AGENT, [{"agent_id": "a1", "at": later}])
        connection.execute(_TOUCH_AGENT, {"agent_id": "a2", "at": later})

    await db.write(write)
    assert _compiled(_TOUCH_AGENT, ("agent_id", "at")) is not None
    stored = await _stored(db, "agents")
    assert stored["a1"][1:] == stored["a2"][1:]
    assert ("text", "2026-11-30 19:32:03.000004") in stored["a1"]  # in UTC


async def test_lookups_by_id_read_driver_rows(db: Database) -> None:
    def write(session: Session) -> None:
        execute_many(session.connection(), insert(MessageRow.__table__), [_message("m-1")])
        session.add(
            AppliedEnvelope(
                id="E1", seq=1, type="t", origin="n", outcome={"ok": True}, applied_at=WHEN
            )
        )

    await db.write(write)

    def read(session: Session) -> tuple[list[Any], list[Any]]:
        connection = session.connection()
        return (
            _rows_with_ids(connection, _MESSAGES_OF, ["m-1", "m-2"]),
            _rows_with_ids(connection, _APPLIED_OF, ["E1", "E2"]),
        )

    messages, applied = await db.write(read)
    assert [row[0] for row in messages] == ["m-1"]
    assert [(row[0], row[1]) for row in applied] == [("E1", '{"ok": true}')]


async def test_a_lookup_of_more_ids_than_one_query_takes(db: Database) -> None:
    await _insert(db, [_message(f"m-{n}") for n in (0, 499, 500, 1199)])
    wanted = [f"m-{n}" for n in range(1200)]

    def read(session: Session) -> list[Any]:
        return _rows_with_ids(session.connection(), _MESSAGES_OF, wanted)

    assert sorted(row[0] for row in await db.write(read)) == ["m-0", "m-1199", "m-499", "m-500"]


async def test_a_failing_driver_write_is_a_store_error_and_rolls_back(db: Database) -> None:
    def write(session: Session) -> None:
        connection = session.connection()
        execute_many(connection, insert(MessageRow.__table__), [_message("dup")])
        try:
            execute_many(connection, insert(MessageRow.__table__), [_message("dup")])
        except DBAPIError as exc:  # what Database.write turns into a StoreError
            assert "UNIQUE" in str(exc.orig)
            raise

    with pytest.raises(StoreError):
        await db.write(write)

    def count(session: Session) -> int:
        return len(session.execute(select(MessageRow.id)).all())

    assert await db.write(count) == 0


async def test_a_python_side_default_takes_the_core_path(db: Database) -> None:
    # AgentRow has Python-side defaults (capabilities, max_tasks…): rows that leave them out
    # must still get them, as Core gives them.
    row = {
        "id": "a1",
        "role": "dev",
        "specialization": None,
        "project": None,
        "task": None,
        "status": "online",
        "node_id": "node-a",
        "session_id": "s1",
        "created_at": WHEN,
        "last_activity": WHEN,
    }

    def write(session: Session) -> None:
        execute_many(session.connection(), insert(AgentRow.__table__), [row])

    await db.write(write)

    def read(session: Session) -> AgentRow | None:
        return session.get(AgentRow, "a1")

    agent = await db.write(read)
    assert agent is not None
    assert agent.capabilities == []
    assert agent.max_tasks == 3


def _rows(first: int, count: int) -> list[dict[str, Any]]:
    return [_message(f"m-{n:06d}") | {"content": {"text": "x" * 2000}} for n in range(first, count)]


async def test_the_writer_leaves_checkpoints_to_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "CHECKPOINT_INTERVAL", 3600.0)
    main_file = tmp_path / "store.db"
    async with sqlite_store(main_file) as db:
        before = main_file.stat().st_size
        # ~12 MB of rows: three times SQLite's own autocheckpoint threshold (1,000 pages).
        for first in range(0, 6000, 500):
            await _insert(db, _rows(first, first + 500))
        # A commit past the threshold would have copied the WAL into the database file.
        assert main_file.stat().st_size == before
        assert (tmp_path / "store.db-wal").stat().st_size > 10_000_000


async def test_the_background_checkpoint_moves_the_wal_into_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "CHECKPOINT_INTERVAL", 0.05)
    async with sqlite_store(tmp_path / "store.db") as db:
        await _insert(db, _rows(0, 2000))
        db.checkpointed.clear()
        async with asyncio.timeout(10):
            await db.checkpointed.wait()
        # 2,000 rows of 2 KB now live in the database file itself.
        assert (tmp_path / "store.db").stat().st_size > 4_000_000

        def count(session: Session) -> int:
            return len(session.execute(select(MessageRow.id)).all())

        assert await db.write(count) == 2000


async def test_close_waits_for_a_checkpoint_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "CHECKPOINT_INTERVAL", 0.01)
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    checkpoint = database_module._Checkpointer._checkpoint

    def slow(self: Any) -> None:
        started.set()
        release.wait(10)
        checkpoint(self)
        finished.set()

    monkeypatch.setattr(database_module._Checkpointer, "_checkpoint", slow)
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}")
    await db.open()
    await _insert(db, [_message("m-1")])
    assert await asyncio.to_thread(started.wait, 10)
    closing = asyncio.create_task(db.close())
    done, _ = await asyncio.wait({closing}, timeout=0.2)
    assert not done  # still waiting for the round under way
    release.set()
    async with asyncio.timeout(10):
        await closing
    assert finished.is_set()


async def test_a_failed_checkpoint_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "CHECKPOINT_INTERVAL", 0.01)
    checkpoint = database_module._Checkpointer._checkpoint
    failures = [OSError("disk hiccup")]

    def flaky(self: Any) -> None:
        if failures:
            raise failures.pop()
        checkpoint(self)

    monkeypatch.setattr(database_module._Checkpointer, "_checkpoint", flaky)
    async with sqlite_store(tmp_path / "store.db") as db:
        await _insert(db, [_message("m-1")])  # one write: the retry needs no other
        async with asyncio.timeout(10):
            await db.checkpointed.wait()
        assert failures == []
