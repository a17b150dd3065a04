"""The database: engine, Alembic migrations, transactions; errors translated at this boundary."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session

from bzzz.errors import BzzzError, ErrorCode
from bzzz.network.sealing import Keyring
from bzzz.store.models import attach_keyring

logger = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"

T = TypeVar("T")

# How often the WAL is checkpointed in the background (see _Checkpointer). Short:
# a checkpoint first syncs the WAL written since the last one, and on a disk the event log
# syncs too, a few megabytes synced at once stall both for tens of milliseconds (measured:
# p99 of cross-node delivery at 1,000 msg/s 69-74 ms with 1 s, 15-44 ms with 0.2 s).
CHECKPOINT_INTERVAL = 0.2
# How long a connection waits for another one's write lock.
BUSY_TIMEOUT_MS = 10_000


class StoreError(BzzzError):
    """The database failed; the client sees a generic message, the log keeps the cause."""

    default_code = ErrorCode.NETWORK_ERROR


class WriterBusy(Exception):
    """SQLite's write lock is taken: a transaction on the event loop would have to wait."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers run beside the projector; NORMAL is durable across process crashes
    # in WAL mode (only an OS crash can lose the last commits, and the log replays them).
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _writer_pragmas(dbapi_connection: Any, record: Any) -> None:
    _sqlite_pragmas(dbapi_connection, record)
    cursor = dbapi_connection.cursor()
    # The writer never checkpoints: a checkpoint copies the WAL into the database file and
    # syncs it, which would stall the commit that crosses the threshold (and every post
    # waiting behind it) for tens of milliseconds. Database checkpoints in the background.
    cursor.execute("PRAGMA wal_autocheckpoint=0")
    cursor.close()
    # The writer's transactions are begun by _Writer.begin, not implicitly by sqlite3: then a
    # savepoint is always inside one, and the write lock is taken at the start.
    dbapi_connection.isolation_level = None


class _Writer:
    """Begins the writer connection's transactions: ``BEGIN IMMEDIATE``.

    Taking the write lock at the start means a transaction never fails halfway for another
    connection's commit. On the event loop it must not wait for the lock at all (the holder,
    an async session, needs the loop to finish): there it fails at once, and the write goes
    to the writer thread, which may wait.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Transactions begun inside fail at once when another connection holds the lock."""
        self._local.nowait = True
        try:
            yield
        finally:
            self._local.nowait = False

    def begin(self, connection: Connection) -> None:
        # On the sqlite3 connection itself: through SQLAlchemy each statement costs ~40 µs.
        driver = connection.connection.driver_connection
        assert driver is not None
        try:
            if not getattr(self._local, "nowait", False):
                driver.execute("BEGIN IMMEDIATE")
                return
            driver.execute("PRAGMA busy_timeout=0")
            try:
                driver.execute("BEGIN IMMEDIATE")
            finally:
                driver.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            raise DBAPIError.instance(
                "BEGIN IMMEDIATE", None, exc, sqlite3.Error, dialect=connection.dialect
            ) from exc


def _is_busy(exc: OperationalError) -> bool:
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


@dataclass(slots=True)
class MigrationProgress:
    """How far the store's migrations are (read by the CLI's progress bar)."""

    done: int = 0
    total: int = 0

    def step(self, **_: Any) -> None:
        """One migration was applied (alembic's on_version_apply)."""
        self.done += 1


def newest_revision() -> str:
    """The newest migration's revision, from the file names (``NNNN_what.py`` is ``NNNN``)."""
    names = (path.name for path in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    return max(name[:4] for name in names)


def _at_newest(connection: Connection) -> bool:
    """The store is at the newest migration: read without Alembic, which takes ~0.2 s to load
    and more to run, so that a CLI command or a node on an up-to-date store skips both."""
    if not inspect(connection).has_table("alembic_version"):
        return False
    rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    return [row[0] for row in rows] == [newest_revision()]


def _upgrade(connection: Connection, progress: MigrationProgress | None = None) -> None:
    if _at_newest(connection):
        return
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    if progress is not None:
        current = MigrationContext.configure(connection).get_current_revision()
        pending = ScriptDirectory.from_config(config).iterate_revisions("heads", current or "base")
        progress.total = len(list(pending))
        config.attributes["on_version_apply"] = progress.step
    command.upgrade(config, "head")


class _Checkpointer:
    """Moves a SQLite WAL into the database file in the background, off the writer.

    A PASSIVE checkpoint on a connection and a thread of its own runs beside the writer's
    commits (WAL mode allows it) and never waits for readers; what it cannot copy yet, the next
    round copies. A round runs every ``CHECKPOINT_INTERVAL`` s, when transactions ended since
    the last one.
    """

    def __init__(self, url: str, writes: Callable[[], int]) -> None:
        self._engine = create_engine(url, pool_size=1, max_overflow=0)
        event.listen(self._engine, "connect", _sqlite_pragmas)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bzzz-db-checkpoint")
        self._writes = writes
        self._task: asyncio.Task[None] | None = None
        # Set after each round (cleared by whoever waits for the next one).
        self.done = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="bzzz-db-checkpoint")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        seen = self._writes()
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL)
            writes = self._writes()
            if writes == seen:
                continue  # nothing written since the last successful round
            try:
                await loop.run_in_executor(self._thread, self._checkpoint)
            except Exception:
                # Maintenance only: the writer's commits stay durable without it, and the
                # next round tries again.
                logger.warning("WAL checkpoint failed; retrying", exc_info=True)
            else:
                seen = writes
                self.done.set()

    def _checkpoint(self) -> None:
        with self._engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    async def close(self) -> None:
        """Stop the rounds, wait for one still running, close the connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self._thread.shutdown, wait=True)
        self._engine.dispose()


def _private_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does (its -wal and -shm take its mode)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    path.chmod(0o600)


class Database:
    """Owns the engine; hands out sessions; runs migrations at open."""

    def __init__(self, url: str, keyring: Keyring | None = None) -> None:
        self.url = url
        self.keyring = keyring
        self.is_sqlite = url.startswith("sqlite")
        self.migrations = MigrationProgress()
        kwargs: dict[str, Any] = {}
        if not self.is_sqlite:
            kwargs.update(pool_size=10, max_overflow=10, pool_pre_ping=True)
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        # Content columns seal with this database's keyring (store/models.py).
        attach_keyring(self.engine.sync_engine.dialect, keyring)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # SQLite writes go through one plain (sync) connection in one thread: a whole batch of
        # the log costs one thread hop instead of one per statement (aiosqlite's model).
        self._sync_engine: Engine | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._writes = 0  # transactions ended, so that an idle node does not checkpoint
        # Writes submitted to the writer thread and not yet over: while there are any, small
        # writes queue behind them instead of waiting for the one connection on the loop.
        self._in_thread = 0
        self._writer_connection: Connection | None = None
        self._checkpointer: _Checkpointer | None = None
        if self.is_sqlite:
            sync_url = url.replace("+aiosqlite", "")
            self._sync_engine = create_engine(sync_url, pool_size=1)
            attach_keyring(self._sync_engine.dialect, keyring)
            event.listen(self._sync_engine, "connect", _writer_pragmas)
            self._begin = _Writer()
            event.listen(self._sync_engine, "begin", self._begin.begin)
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bzzz-db")
            self._checkpointer = _Checkpointer(sync_url, lambda: self._writes)

    @property
    def checkpointed(self) -> asyncio.Event:
        """Set after each background WAL checkpoint (SQLite; tests clear it and wait)."""
        assert self._checkpointer is not None, "only a SQLite database checkpoints"
        return self._checkpointer.done

    async def open(self) -> None:
        """Bring the schema to the newest migration."""
        if self.is_sqlite:
            path = self.url.split("///", 1)[-1]
            if path and path != ":memory:":
                _private_file(Path(path))
        try:
            async with self.engine.begin() as conn:
                await conn.run_sync(_upgrade, self.migrations)
        except SQLAlchemyError as exc:
            raise StoreError("the database could not be opened or migrated") from exc
        if self._checkpointer is not None:
            self._checkpointer.start()

    async def close(self) -> None:
        """Dispose of the engines' connections."""
        if self._checkpointer is not None:
            await self._checkpointer.close()
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        if self._writer_connection is not None:
            self._writer_connection.close()
            self._writer_connection = None
        if self._sync_engine is not None:
            self._sync_engine.dispose()
        await self.engine.dispose()

    async def write(self, work: Callable[[Session], T], *, small: bool = False) -> T:
        """Run ``work`` with a sync session in one transaction (committed on success).

        ``small`` work (one envelope of the log) runs on the event loop when no write is
        under way in the writer thread: it takes less time than the two thread hops.
        """
        try:
            if self._sync_engine is not None and self._writer is not None:
                if small and not self._in_thread:
                    try:
                        return self._write_sync(work, wait=False)
                    except OperationalError as exc:
                        if not _is_busy(exc):
                            raise
                        # Another connection writes: wait for it in the writer thread.
                return await self._write_in_thread(work)
            async with self._sessions() as session, session.begin():
                return await session.run_sync(work)
        except SQLAlchemyError as exc:
            logger.exception("database error")
            raise StoreError("the node's database failed; nothing was changed") from exc
        finally:
            # Counted once the transaction is over: a checkpoint round that sees the count
            # change started after the commit.
            self._writes += 1

    async def write_apart(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in one transaction on a connection of the pool, not the log's writer.

        For a node's own records beside the log (the audit trail): the projector keeps a
        transaction open on the writer's connection across awaits (``transaction_here``), and
        another write there would run inside it. On SQLite this write takes the database's
        write lock like any other connection (the projector then applies through its consumer).
        """
        try:
            async with self._sessions() as session, session.begin():
                return await session.run_sync(work)
        except SQLAlchemyError as exc:
            logger.exception("database error")
            raise StoreError("the node's database failed; nothing was changed") from exc

    async def _write_in_thread(self, work: Callable[[Session], T]) -> T:
        assert self._writer is not None
        loop = asyncio.get_running_loop()
        self._in_thread += 1
        running = self._writer.submit(self._write_sync, work)
        # Counted down when the thread is done, not when a cancelled caller stops waiting:
        # until then the connection is the thread's.
        running.add_done_callback(lambda _: loop.call_soon_threadsafe(self._thread_done))
        return await asyncio.wrap_future(running)

    def _thread_done(self) -> None:
        self._in_thread -= 1

    @property
    def writes_here(self) -> bool:
        """Whether ``transaction_here`` is available (SQLite's single writer)."""
        return self._writer is not None

    @contextlib.contextmanager
    def transaction_here(self) -> Iterator[Session]:
        """A write transaction on the event loop that stays open across awaits in the block.

        Committed when the block ends, rolled back when it raises. It never waits for the
        write lock: ``WriterBusy`` when another connection holds it (or a write is under way
        in the writer thread), before the block runs. While it is open no other write of this
        database may start: the caller serializes its writes (the projector does).
        """
        if self._writer is None or self._in_thread:
            raise WriterBusy("a write is under way")
        try:
            with self._transaction(wait=False) as session:
                yield session
        except OperationalError as exc:
            if _is_busy(exc):
                raise WriterBusy("another connection holds the write lock") from exc
            logger.exception("database error")
            raise StoreError("the node's database failed; nothing was changed") from exc
        except SQLAlchemyError as exc:
            logger.exception("database error")
            raise StoreError("the node's database failed; nothing was changed") from exc
        finally:
            self._writes += 1

    def _write_sync(self, work: Callable[[Session], T], *, wait: bool = True) -> T:
        with self._transaction(wait=wait) as session:
            return work(session)

    @contextlib.contextmanager
    def _transaction(self, *, wait: bool) -> Iterator[Session]:
        """A transaction on the writer's connection; ``wait``: for another one's write lock."""
        assert self._sync_engine is not None
        # The writer keeps its one connection: a pool checkout and reset per transaction
        # cost more than a small transaction's statements.
        if self._writer_connection is None:
            self._writer_connection = self._sync_engine.connect()
        try:
            with (
                Session(bind=self._writer_connection, expire_on_commit=False) as session,
                session.begin(),
            ):
                # BEGIN IMMEDIATE: the write lock is held before the work.
                if wait:
                    session.connection()
                else:
                    with self._begin.without_waiting():
                        session.connection()
                yield session
        except SQLAlchemyError:
            # Whatever state a failure left the connection in, the next write starts afresh.
            connection, self._writer_connection = self._writer_connection, None
            if connection is not None:
                connection.close()
            raise

    async def compact(self) -> None:
        """Give the space of deleted rows back so their bytes leave the disk (retention).

        SQLite: the WAL is checkpointed into the file and truncated, the file is rebuilt
        (VACUUM, which leaves no free page holding old rows), and the rebuild's WAL is
        checkpointed and truncated again. PostgreSQL: VACUUM, outside any transaction.
        """
        try:
            if self._writer is not None:
                loop = asyncio.get_running_loop()
                self._in_thread += 1
                running = self._writer.submit(self._compact_sqlite)
                running.add_done_callback(lambda _: loop.call_soon_threadsafe(self._thread_done))
                await asyncio.wrap_future(running)
                return
            async with self.engine.connect() as connection:
                plain = await connection.execution_options(isolation_level="AUTOCOMMIT")
                await plain.exec_driver_sql("VACUUM")
        except (SQLAlchemyError, sqlite3.Error) as exc:
            logger.exception("database error")
            raise StoreError("the node's database could not be compacted") from exc
        finally:
            self._writes += 1

    def _compact_sqlite(self) -> None:
        assert self._sync_engine is not None
        if self._writer_connection is None:
            self._writer_connection = self._sync_engine.connect()
        driver = self._writer_connection.connection.dbapi_connection
        assert driver is not None
        # The writer's connection runs in autocommit (isolation_level None): VACUUM may run.
        for statement in (
            "PRAGMA wal_checkpoint(TRUNCATE)",
            "VACUUM",
            "PRAGMA wal_checkpoint(TRUNCATE)",
        ):
            driver.execute(statement).close()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session in a transaction, committed on success."""
        try:
            async with self._sessions() as session, session.begin():
                yield session
        except SQLAlchemyError as exc:
            logger.exception("database error")
            raise StoreError("the node's database failed; nothing was changed") from exc
        finally:
            self._writes += 1
