"""A node's projected state as plain rows: dumped for a snapshot, loaded into an empty store.

What a snapshot holds is every table the log projects into — the projects' content (agents,
tasks, messages, inboxes, activity, threads and their participants, reactions, escalations,
SLURP events, memory, knowledge, reservations) and the network-wide state beside it (applied
envelopes, tokens, audit heads, costs, tombstones, retention runs, subscriptions) — as of one
log sequence, read in one transaction. Both go together: network-wide envelopes act on project
rows in log order (a node going offline takes its agents offline, retention tombstones
messages, a sweep ends reservations), so rows of the two are exact only at the same sequence.
What only this node keeps (its webhook deliveries and SLURP submissions, its own audit
records and anchor, the events matched to its own subscriptions) is left out.

Values are those the ORM reads (sealed columns opened, times as ISO text): the caller seals the
whole document (``network/snapshots.py``), and loading writes them through the same column
types, so they are sealed again under the loading node's key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, DateTime, Table, create_engine, event, func, insert, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from bzzz.store.batch import execute_many
from bzzz.store.database import Database, StoreError
from bzzz.store.models import AppliedEnvelope, Base, UTCDateTime, attach_keyring

T = TypeVar("T")

logger = logging.getLogger(__name__)

# Rows only this node has: another node's would be wrong here (and a replay makes none).
NODE_LOCAL = frozenset(
    {
        "webhook_deliveries",
        "slurp_submissions",
        "audit_records",
        "audit_anchors",
        "subscription_events",
    }
)
# Rows per insert statement when loading.
LOAD_CHUNK = 5_000


@dataclass(frozen=True, slots=True)
class Dumped:
    """A store's state as one compressed stream, with the sequence it is the state of."""

    sequence: int
    packed: bytes
    rows: int


def snapshot_tables() -> list[Table]:
    """The tables a snapshot holds, parents before children (the metadata's order)."""
    return [table for table in Base.metadata.sorted_tables if table.name not in NODE_LOCAL]


def _is_time(column: Any) -> bool:
    return isinstance(column.type, UTCDateTime | DateTime)


def _header(table: Table) -> bytes:
    names = [column.name for column in table.columns]
    return json.dumps({"table": table.name, "columns": names}, separators=(",", ":")).encode()


def dump(connection: Connection) -> Dumped:
    """Every snapshot table's rows with the highest applied sequence, in the caller's
    transaction: one compressed stream of JSON lines (a table's header, then its rows as
    arrays of up to LOAD_CHUNK rows, each row an array of its columns' values).

    Rows come in primary-key order, so two stores with the same state dump the same rows.
    Written as they are read: memory holds the compressed stream, not the rows.
    """
    applied = cast(Table, AppliedEnvelope.__table__)
    sequence = connection.execute(select(func.max(applied.c.seq))).scalar_one() or 0
    packer = zlib.compressobj(6)
    parts: list[bytes] = []
    count = 0
    for table in snapshot_tables():
        times = [index for index, column in enumerate(table.columns) if _is_time(column)]
        parts.append(packer.compress(_header(table) + b"\n"))
        result = connection.execution_options(yield_per=LOAD_CHUNK).execute(
            select(table).order_by(*table.primary_key.columns)
        )
        for chunk in result.partitions():
            found = [list(row) for row in chunk]
            for values in found:
                for index in times:
                    if values[index] is not None:
                        values[index] = values[index].isoformat()
            parts.append(packer.compress(json.dumps(found, separators=(",", ":")).encode()))
            parts.append(packer.compress(b"\n"))
            count += len(found)
    parts.append(packer.flush())
    return Dumped(int(sequence), b"".join(parts), count)


def entries(packed: bytes) -> Iterator[tuple[Table, list[str], list[Any] | None]]:
    """A dump read back line by line: (table, its columns as dumped, None) where a table
    starts, then (table, columns, values) for each of its rows.

    ValueError (or zlib.error) when ``packed`` is not a dump of this schema's tables.
    """
    known = {table.name: table for table in snapshot_tables()}
    table: Table | None = None
    columns: list[str] = []
    for line in _lines(packed):
        parsed = json.loads(line)
        if isinstance(parsed, dict):
            table = known.get(str(parsed.get("table")))
            columns = [str(name) for name in parsed.get("columns", [])]
            if table is None or not set(columns) <= {column.name for column in table.columns}:
                raise ValueError(f"not a table of this store: {line[:80]!r}")
            yield table, columns, None
        elif isinstance(parsed, list) and table is not None:
            for values in parsed:
                if not isinstance(values, list) or len(values) != len(columns):
                    raise ValueError(f"not a row of {table.name}")
                yield table, columns, values
        else:
            raise ValueError("rows before any table")


def rows_of(packed: bytes) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows of a dump, by column name (tests compare two stores with it)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for table, columns, values in entries(packed):
        rows = found.setdefault(table.name, [])
        if values is not None:
            rows.append(dict(zip(columns, values, strict=True)))
    return found


def _lines(packed: bytes) -> Iterator[bytes]:
    unpacker = zlib.decompressobj()
    rest = b""
    for first in range(0, len(packed), 1 << 20):
        rest += unpacker.decompress(packed[first : first + (1 << 20)])
        *complete, rest = rest.split(b"\n")
        yield from (line for line in complete if line)
    rest += unpacker.flush()
    yield from (line for line in rest.split(b"\n") if line)


def load(session: Session, packed: bytes) -> int:
    """Insert a dump's rows into an empty store (in the caller's transaction); how many.

    ValueError (or zlib.error) when ``packed`` is not a dump of this schema's tables.
    """
    connection = session.connection()
    count = 0
    chunk: list[dict[str, Any]] = []
    target: Table | None = None
    times: list[str] = []
    for table, columns, values in entries(packed):
        if values is None or len(chunk) >= LOAD_CHUNK:
            if chunk and target is not None:
                execute_many(connection, insert(target), chunk)
            count, chunk = count + len(chunk), []
        if values is None:
            target = table
            times = [name for name in columns if _is_time(table.columns[name])]
            continue
        row = dict(zip(columns, values, strict=True))
        for name in times:
            if row[name] is not None:
                row[name] = datetime.fromisoformat(row[name])
        chunk.append(row)
    if chunk and target is not None:
        execute_many(connection, insert(target), chunk)
        count += len(chunk)
    if connection.dialect.name == "postgresql":
        _advance_serials(connection)
    return count


def _advance_serials(connection: Connection) -> None:
    """Rows inserted with their ids leave PostgreSQL's sequences behind: move them on."""
    for table in snapshot_tables():
        for column in table.primary_key.columns:
            if column.autoincrement is True:
                connection.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', '{column.name}'), "
                    f"COALESCE((SELECT MAX({column.name}) FROM {table.name}), 0) + 1, false)"
                )


async def read_consistent(db: Database, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one read transaction that sees one state of the store, beside the
    projector's writes (which it never blocks).

    SQLite: a connection of its own in a worker thread, in WAL mode a reader never waits for
    the writer; its explicit BEGIN holds one snapshot of the file for every statement.
    PostgreSQL: a REPEATABLE READ transaction.
    """
    try:
        if db.is_sqlite:
            return await asyncio.to_thread(_read_sqlite, db, work)
        async with db.engine.connect() as connection:
            reading = await connection.execution_options(isolation_level="REPEATABLE READ")
            async with reading.begin():
                return await reading.run_sync(work)
    except SQLAlchemyError as exc:
        logger.exception("database error")
        raise StoreError("the node's database could not be read") from exc


def _read_sqlite(db: Database, work: Callable[[Connection], T]) -> T:
    engine = create_engine(db.url.replace("+aiosqlite", ""), pool_size=1)
    attach_keyring(engine.dialect, db.keyring)

    @event.listens_for(engine, "connect")
    def _manual(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the BEGIN below is the transaction

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")

    try:
        with engine.connect() as connection, connection.begin():
            return work(connection)
    finally:
        engine.dispose()
