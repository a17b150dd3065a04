"""The SQLite writer: where its transactions run, how they begin, and what waits for what."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from bzzz.store.database import Database, StoreError, WriterBusy
from bzzz.store.models import MessageRow

from .support import message_row, sqlite_store


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with sqlite_store(tmp_path / "store.db") as database:
        yield database


def _ids(session: Session) -> list[str]:
    return sorted(session.execute(select(MessageRow.id)).scalars())


def _inserting(message_id: str, threads: list[int]) -> Callable[[Session], None]:
    """Work that stores one message and notes the thread it ran on."""

    def work(session: Session) -> None:
        threads.append(threading.get_ident())
        session.execute(insert(MessageRow.__table__), [message_row(message_id)])

    return work


async def _held_thread_write(
    db: Database, message_id: str, threads: list[int]
) -> tuple[asyncio.Task[None], threading.Event]:
    """A write under way in the writer thread, held there until the returned event is set."""
    started, release = threading.Event(), threading.Event()

    def held(session: Session) -> None:
        started.set()
        release.wait(5)
        _inserting(message_id, threads)(session)

    writing = asyncio.create_task(db.write(held))
    async with asyncio.timeout(5):
        while not started.is_set():  # noqa: ASYNC110 - the thread has no event for the loop
            await asyncio.sleep(0.01)
    return writing, release


async def test_a_small_write_runs_on_the_event_loop_and_a_large_one_on_the_writer_thread(
    db: Database,
) -> None:
    threads: list[int] = []

    await db.write(_inserting("small", threads), small=True)
    await db.write(_inserting("large", threads))

    loop_thread = threading.get_ident()
    assert threads[0] == loop_thread
    assert threads[1] != loop_thread
    assert await db.write(_ids) == ["large", "small"]


async def test_a_small_write_waits_in_the_writer_thread_while_a_session_holds_the_lock(
    db: Database,
) -> None:
    threads: list[int] = []
    async with db.session() as session:
        # An async session's write holds SQLite's write lock until it commits, and it needs
        # the event loop to get there: the small write must not wait for it on the loop.
        await session.execute(insert(MessageRow.__table__), [message_row("from-session")])
        pending = asyncio.create_task(db.write(_inserting("small", threads), small=True))
        await asyncio.sleep(0)  # let the task try the loop and hand over to the thread
        assert not pending.done()
        assert threads == []  # it has not run: the lock was refused before the work began
    async with asyncio.timeout(5):
        await pending

    assert len(threads) == 1 and threads[0] != threading.get_ident()
    assert await db.write(_ids) == ["from-session", "small"]


async def test_a_small_write_behind_a_thread_write_queues_in_the_thread(db: Database) -> None:
    threads: list[int] = []
    first, release = await _held_thread_write(db, "first", threads)
    second = asyncio.create_task(db.write(_inserting("second", threads), small=True))
    await asyncio.sleep(0)
    release.set()
    async with asyncio.timeout(5):
        await asyncio.gather(first, second)

    assert threads[0] == threads[1] != threading.get_ident()
    assert await db.write(_ids) == ["first", "second"]


@pytest.mark.parametrize("small", [False, True])
async def test_a_savepoint_first_in_a_transaction_rolls_back_with_it(
    db: Database, small: bool
) -> None:
    # The isolate path gives each envelope a savepoint; one that opens the transaction must
    # not commit its rows when it is released (sqlite3's own transaction handling did).
    def work(session: Session) -> None:
        with session.begin_nested():
            session.execute(insert(MessageRow.__table__), [message_row("in-savepoint")])
        session.execute(insert(MessageRow.__table__), [message_row("in-savepoint")])  # fails

    with pytest.raises(StoreError):
        await db.write(work, small=small)

    assert await db.write(_ids) == []


async def test_the_loop_does_not_write_while_a_cancelled_thread_write_still_runs(
    db: Database,
) -> None:
    threads: list[int] = []
    writing, release = await _held_thread_write(db, "thread", threads)
    writing.cancel()  # the caller stops waiting; the thread's transaction goes on
    with pytest.raises(asyncio.CancelledError):
        await writing
    # The writer's connection is still the thread's: no transaction on the loop now.
    with pytest.raises(WriterBusy), db.transaction_here():
        pass
    small = asyncio.create_task(db.write(_inserting("small", threads), small=True))
    await asyncio.sleep(0)
    release.set()
    async with asyncio.timeout(5):
        await small

    assert threads[0] == threads[1] != threading.get_ident()  # both in the writer thread
    assert await db.write(_ids) == ["small", "thread"]
