"""The projector's SQLite write path: rows written on the driver's cursor read back as Core's do."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from bzzz.store import database as database_module
from bzzz.store.batch import _APPLIED_OF, _MESSAGES_OF, _execute_many, _rows_with_ids
from bzzz.store.database import Database, StoreError
from bzzz.store.models import AgentRow, AppliedEnvelope, MessageRow

WHEN = datetime(2026, 11, 30, 19, 7, 51, 842569, tzinfo=UTC)


def _message(message_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "sender": "alice",
        "target_address": "bzzz://bob",
        "message_type": "text",
        "content": {"text": "héllo", "n": [1, 2.5, None, True]},
        "priority": "normal",
        "thread_id": None,
        "reply_to": None,
        "recipients": ["bob"],
        "posted_at": WHEN,
    }


@contextlib.asynccontextmanager
async def _store(path: Path) -> AsyncIterator[Database]:
    database = Database(f"sqlite+aiosqlite:///{path}")
    await database.open()
    try:
        yield database
    finally:
        await database.close()


async def _insert(db: Database, rows: list[dict[str, Any]]) -> None:
    await db.write(lambda s: _execute_many(s.connection(), insert(MessageRow.__table__), rows))


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with _store(tmp_path / "store.db") as database:
        yield database


async def test_driver_rows_equal_core_rows(db: Database) -> None:
    def write(session: Session) -> None:
        connection = session.connection()
        _execute_many(connection, insert(MessageRow.__table__), [_message("raw-1")])
        connection.execute(insert(MessageRow.__table__), [_message("core-1")])

    await db.write(write)

    def read(session: Session) -> dict[str, tuple[Any, ...]]:
        rows = session.execute(select(MessageRow.__table__)).all()
        return {row.id: tuple(row)[1:] for row in rows}

    rows = await db.write(read)
    assert rows["raw-1"] == rows["core-1"]
    assert rows["raw-1"][3] == {"text": "héllo", "n": [1, 2.5, None, True]}
    assert rows["raw-1"][-1] == WHEN


async def test_lookups_by_id_read_driver_rows(db: Database) -> None:
    def write(session: Session) -> None:
        _execute_many(session.connection(), insert(MessageRow.__table__), [_message("m-1")])
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


async def test_a_failing_driver_write_is_a_store_error_and_rolls_back(db: Database) -> None:
    def write(session: Session) -> None:
        connection = session.connection()
        _execute_many(connection, insert(MessageRow.__table__), [_message("dup")])
        try:
            _execute_many(connection, insert(MessageRow.__table__), [_message("dup")])
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
        _execute_many(session.connection(), insert(AgentRow.__table__), [row])

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
    async with _store(main_file) as db:
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
    async with _store(tmp_path / "store.db") as db:
        await _insert(db, _rows(0, 2000))
        db.checkpointed.clear()
        async with asyncio.timeout(10):
            await db.checkpointed.wait()
        # 2,000 rows of 2 KB now live in the database file itself.
        assert (tmp_path / "store.db").stat().st_size > 4_000_000

        def count(session: Session) -> int:
            return len(session.execute(select(MessageRow.id)).all())

        assert await db.write(count) == 2000
