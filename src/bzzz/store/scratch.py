"""A scratch store: envelopes applied by the store's own appliers to an empty in-memory SQLite.

A thread read ``as_of`` a point of the log is the store that the thread's envelopes up to that
point build, so it is built here with ``apply_batch`` (the same appliers, the same order, the
same refusals as a node's projection) and read with the same repositories as the live store.
Nothing of it outlives the ``async with``: one connection, one transaction, rolled back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import aiosqlite
from sqlalchemy import Connection, Engine, create_engine, event, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool
from ulid import ULID

from bzzz.network.envelope import Envelope
from bzzz.store.batch import BatchContext, apply_batch
from bzzz.store.models import AppliedEnvelope, Base, attach_keyring
from bzzz.store.projection import ProjectionLimits

# The scratch database a connection opens: a named in-memory SQLite database shared by this
# process's connections (the writer applies with sqlite3, the reader reads with aiosqlite,
# as the live store is written and read), gone when its last connection closes.
_DATABASE: contextvars.ContextVar[str] = contextvars.ContextVar("bzzz_scratch_database")
_ENGINES: tuple[Engine, AsyncEngine] | None = None


def _uri() -> str:
    return f"file:bzzz-scratch-{ULID()}?mode=memory&cache=shared"


def _connect() -> sqlite3.Connection:
    connection = sqlite3.connect(_DATABASE.get(), uri=True, check_same_thread=False)
    # SQLAlchemy begins the transactions (below): then the savepoints of an isolated batch
    # work on SQLite (SQLAlchemy's documented recipe).
    connection.isolation_level = None
    return connection


async def _connect_async() -> aiosqlite.Connection:
    return await aiosqlite.connect(_DATABASE.get(), uri=True)


def _begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")


def _engines() -> tuple[Engine, AsyncEngine]:
    """One pair of engines for every scratch store (NullPool: each checkout connects to the
    database of the current block); one dialect keeps the batch's compiled statements
    cached once."""
    global _ENGINES
    if _ENGINES is None:
        writer = create_engine("sqlite://", creator=_connect, poolclass=NullPool)
        reader = create_async_engine(
            "sqlite+aiosqlite://", async_creator=_connect_async, poolclass=NullPool
        )
        # In memory and gone when the block ends: content is kept in clear there.
        attach_keyring(writer.dialect, None)
        attach_keyring(reader.sync_engine.dialect, None)
        event.listen(writer, "begin", _begin)
        _ENGINES = writer, reader
    return _ENGINES


def _build(writer: Engine, envelopes: Sequence[tuple[Envelope, int]], ctx: BatchContext) -> None:
    Base.metadata.create_all(writer)
    try:
        with Session(writer) as session, session.begin():
            apply_batch(session, envelopes, ctx)
    except (SQLAlchemyError, KeyError, TypeError, ValueError, AttributeError):
        # As the projector does: envelope by envelope, so that one a node refused as
        # malformed is refused here the same way (the failed transaction left nothing).
        with Session(writer) as session, session.begin():
            apply_batch(session, envelopes, ctx, isolate=True)


# One step of a staged build: envelopes to apply, then (optionally) a call that is handed
# the store's image as it stands after them (a checkpoint to start from later).
Stage = tuple[Sequence[tuple[Envelope, int]], Callable[[bytes], None] | None]


def image_of(connection: sqlite3.Connection) -> bytes:
    """The whole database of ``connection`` as bytes (SQLite's serialized form)."""
    copy = sqlite3.connect(":memory:")
    try:
        connection.backup(copy)
        return copy.serialize()
    finally:
        copy.close()


def _restore(connection: sqlite3.Connection, image: bytes) -> None:
    """Replace the database of ``connection`` with ``image`` (from ``image_of``)."""
    copy = sqlite3.connect(":memory:")
    try:
        copy.deserialize(image)
        copy.backup(connection)
    finally:
        copy.close()


def _build_stages(
    writer: Engine,
    keeper: sqlite3.Connection,
    base: bytes | None,
    stages: Sequence[Stage],
    node_id: str,
    limits: ProjectionLimits,
) -> None:
    if base is not None:
        _restore(keeper, base)
    for envelopes, keep in stages:
        # One batch a stage, as the projector applies the log in batches of any size.
        _build(writer, envelopes, BatchContext(node_id, limits, None))
        if keep is not None:
            keep(image_of(keeper))


@contextlib.asynccontextmanager
async def scratch_store(
    envelopes: Sequence[tuple[Envelope, int]],
    node_id: str,
    limits: ProjectionLimits,
    *,
    base: bytes | None = None,
    stages: Sequence[Stage] = (),
) -> AsyncIterator[AsyncSession]:
    """A session on an empty store (or one restored from ``base``, an image a stage kept)
    with ``stages`` and then ``envelopes`` (opened, with their log sequences) applied in
    order; read it as the live store is read."""
    writer, reader = _engines()
    token = _DATABASE.set(_uri())
    keeper = _connect()  # holds the in-memory database for the time of the block
    try:
        steps = [*stages, (envelopes, None)]
        # On a worker thread, as the live store's batches are written (it copies the context).
        await asyncio.to_thread(_build_stages, writer, keeper, base, steps, node_id, limits)
        async with AsyncSession(reader, expire_on_commit=False) as session:
            yield session
    finally:
        keeper.close()
        _DATABASE.reset(token)


async def applied_sequences(session: AsyncSession, ids: list[str]) -> dict[str, int]:
    """The log sequences at which the live store applied these envelope ids (those it has)."""
    rows = await session.execute(
        select(AppliedEnvelope.id, AppliedEnvelope.seq).where(AppliedEnvelope.id.in_(ids))
    )
    return {str(row[0]): int(row[1]) for row in rows}


async def applied_outcomes(session: AsyncSession, ids: list[str]) -> dict[str, dict[str, Any]]:
    """What the live store recorded of applying these envelope ids (those it applied): ids,
    codes and counts, never content (``projection.recorded``)."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), 500):
        rows = await session.execute(
            select(AppliedEnvelope.id, AppliedEnvelope.outcome).where(
                AppliedEnvelope.id.in_(ids[start : start + 500])
            )
        )
        for env_id, outcome in rows:
            found[str(env_id)] = dict(outcome) if isinstance(outcome, dict) else {}
    return found
