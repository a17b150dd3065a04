"""A node's projected state as a SQLite database: dumped for a snapshot, loaded into an empty store.

What a snapshot holds is every table the log projects into — the projects' content (agents,
tasks, messages, inboxes, activity, threads and their participants, reactions, escalations,
SLURP events, memory, knowledge, reservations) and the network-wide state beside it (applied
envelopes, tokens, audit heads, costs, tombstones, retention runs, subscriptions) — as of one
log sequence, read in one transaction. Both go together: network-wide envelopes act on project
rows in log order (a node going offline takes its agents offline, retention tombstones
messages, a sweep ends reservations), so rows of the two are exact only at the same sequence.
What only this node keeps (its webhook deliveries and SLURP submissions, its own audit
records and anchor, the events matched to its own subscriptions) is left out.

The form is the store's own: a SQLite file with the snapshot tables (no secondary indexes), its
values as SQLite stores them, sealed columns opened (the caller seals the whole compressed file:
``network/snapshots.py``). Between two SQLite stores a dump and a load are each one
``INSERT … SELECT`` a table on an attached file, so the rows never pass through Python: only
the sealed columns do, through functions that open them under the writer's key and seal them
again under the loader's (BENCHMARKS.md, "bootstrap from a snapshot"). A PostgreSQL store
reads and writes the same file through the ORM's column types.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import shutil
import sqlite3
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    Engine,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    func,
    insert,
    make_url,
    select,
)
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.schema import CreateTable
from sqlalchemy.types import TypeDecorator, TypeEngine

from bzzz.network.sealing import Keyring, SealError, is_sealed
from bzzz.store.batch import execute_many
from bzzz.store.database import BUSY_TIMEOUT_MS, Database, StoreError
from bzzz.store.models import AppliedEnvelope, Base, SealedJSON, SealedText, attach_keyring

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
# Rows a statement carries where rows pass through the ORM (PostgreSQL).
CHUNK = 5_000
# Bytes compressed or decompressed at a time: memory holds the compressed file, not the file.
_PIECE = 1 << 20
# zlib's level for the file: 1 packs a store's pages to about a fifth, several times faster
# than the default 6, which gains a few percent more.
_LEVEL = 1
# A dump's file may expand to this many times its compressed size, no more (a store's pages
# pack to about a fifth): a body that would fill the store's disk is refused.
_MAX_EXPANSION = 32
_MIN_ROOM = 64 << 20  # a small store's file is mostly empty pages: it packs far tighter
# Scratch directories older than this are left over from a process that died mid-dump or
# mid-load (they hold opened values): the next dump or load removes them.
_STALE_SCRATCH_S = 3600.0
# The functions the SQL copies call on sealed columns (registered on the copying connection).
_OPEN_TEXT, _OPEN_JSON = "bzzz_open_text", "bzzz_open_json"
_SEAL_TEXT, _SEAL_JSON = "bzzz_seal_text", "bzzz_seal_json"


@dataclass(frozen=True, slots=True)
class Dumped:
    """A store's state as one compressed SQLite file, with the sequence it is the state of."""

    sequence: int
    packed: bytes
    rows: int


def snapshot_tables() -> list[Table]:
    """The tables a snapshot holds, parents before children (the metadata's order)."""
    return [table for table in Base.metadata.sorted_tables if table.name not in NODE_LOCAL]


@functools.cache
def _file_tables() -> dict[str, Table]:
    """The snapshot tables as the file holds them: JSON columns declared TEXT (a store's JSON
    column has NUMERIC affinity: the file keeps the JSON text exactly as written)."""
    metadata = MetaData()
    tables: dict[str, Table] = {}
    for table in snapshot_tables():
        copy = table.to_metadata(metadata)
        for column in copy.columns:
            if isinstance(column.type, JSON | SealedJSON):
                column.type = Text()
        tables[table.name] = copy
    return tables


@functools.cache
def _file_ddl() -> dict[str, str]:
    """Each file table's CREATE TABLE statement (what its ``sqlite_schema`` row must say)."""
    dialect = sqlite_dialect.dialect()
    return {
        name: str(CreateTable(table).compile(dialect=dialect)).strip()
        for name, table in _file_tables().items()
    }


# --- dumping -----------------------------------------------------------------------------------


async def dump(db: Database) -> Dumped:
    """The store's snapshot tables as of one state (see the module docstring), read beside the
    projector's writes, which it never holds up: SQLite reads in its own WAL read transaction,
    PostgreSQL in a REPEATABLE READ one."""
    with _scratch(db) as directory:
        path = directory / "snapshot.db"
        try:
            if db.is_sqlite:
                sequence, count = await asyncio.to_thread(_dump_sqlite, db, path)
            else:
                sequence, count = await _read_consistent(db, lambda c: _dump_rows(c, path))
        except (SQLAlchemyError, sqlite3.Error, SealError) as exc:
            logger.exception("could not dump the store")
            raise StoreError("the node's database could not be read") from exc
        packed = await asyncio.to_thread(_pack, path)
    return Dumped(sequence, packed, count)


def _dump_sqlite(db: Database, path: Path) -> tuple[int, int]:
    """One transaction on a connection of its own: its first read fixes the state every
    statement after it sees (WAL), its writes go to the attached file alone."""
    _create_tables(path)
    connection = _connect(_store_path(db), db.keyring)
    try:
        connection.execute("ATTACH DATABASE ? AS snap", (str(path),))
        connection.execute("PRAGMA snap.journal_mode=OFF")
        connection.execute("PRAGMA snap.synchronous=OFF")
        connection.execute("BEGIN")
        sequence = connection.execute("SELECT max(seq) FROM main.applied_envelopes").fetchone()
        # In primary-key order: the file's rows are then in the order a load inserts best.
        count = _copy_tables(connection, "main", "snap", opening=True, ordered=True)
        connection.execute("COMMIT")
        return int(sequence[0] or 0), count
    finally:
        connection.close()


def _dump_rows(connection: Connection, path: Path) -> tuple[int, int]:
    """Through the ORM: rows read opened (the source's column types), written in clear."""
    applied = cast(Table, AppliedEnvelope.__table__)
    sequence = connection.execute(select(func.max(applied.c.seq))).scalar_one() or 0
    _create_tables(path)
    target = _file_engine(path)
    try:
        with target.begin() as writing:
            count = _copy_rows(connection, writing)
    finally:
        target.dispose()
    return int(sequence), count


def _copy_rows(source: Connection, target: Connection) -> int:
    """Every snapshot table's rows from one connection to the other through the ORM's column
    types (each side's: opened from one, sealed or not by the other), in primary-key order."""
    count = 0
    for table in snapshot_tables():
        result = source.execution_options(yield_per=CHUNK).execute(
            select(table).order_by(*table.primary_key.columns)
        )
        for chunk in result.partitions():
            found = [dict(row._mapping) for row in chunk]
            execute_many(target, insert(table), found)
            count += len(found)
    return count


def _pack(path: Path) -> bytes:
    packer = zlib.compressobj(_LEVEL)
    parts: list[bytes] = []
    with path.open("rb") as file:
        while piece := file.read(_PIECE):
            parts.append(packer.compress(piece))
    parts.append(packer.flush())
    return b"".join(parts)


# --- loading -----------------------------------------------------------------------------------


async def load(db: Database, packed: bytes, sequence: int) -> int:
    """Insert a dump's rows into an empty store, in one transaction; how many.

    ValueError (or zlib.error) when ``packed`` is not a dump of this schema's tables at
    ``sequence`` (the one its signed header names); StoreError when it could not be written.
    The store is then left as it was.
    """
    with _scratch(db) as directory:
        path = directory / "snapshot.db"
        try:
            await asyncio.to_thread(_unpack, packed, path)
        except OSError as exc:
            raise StoreError("the snapshot's file could not be written") from exc
        await asyncio.to_thread(_check, path, sequence)
        try:
            if db.is_sqlite:
                return await asyncio.to_thread(_load_sqlite, db, path)
            return await db.write(lambda session: _load_rows(session.connection(), path))
        except sqlite3.IntegrityError as exc:
            raise StoreError("the snapshot's rows do not fit this store") from exc
        except sqlite3.Error as exc:
            logger.exception("could not load the snapshot")
            raise StoreError("the node's database could not be written") from exc


def _unpack(packed: bytes, path: Path) -> None:
    """The compressed file written out; ValueError when it is cut short or would grow past
    _MAX_EXPANSION times its size (at least _MIN_ROOM) or the disk's free space."""
    room = min(max(_MAX_EXPANSION * len(packed), _MIN_ROOM), shutil.disk_usage(path.parent).free)
    unpacker = zlib.decompressobj()
    written = 0
    with path.open("wb") as file:
        for first in range(0, len(packed), _PIECE):
            piece = packed[first : first + _PIECE]
            while piece:
                out = unpacker.decompress(piece, _PIECE)
                written += len(out)
                if written > room:
                    raise ValueError(f"the dump expands past {room} bytes")
                file.write(out)
                piece = unpacker.unconsumed_tail
        file.write(unpacker.flush())
    if not unpacker.eof:
        raise ValueError("the dump is cut short")


def _check(path: Path, sequence: int) -> None:
    """ValueError unless the file is a dump of this schema at ``sequence``: a SQLite database
    whose schema is exactly the snapshot tables (as ``_create_tables`` makes them: no view,
    trigger or other object), every value of the storage class its column takes, and the
    highest applied sequence the one the signed header names."""
    expected = _file_ddl()
    try:
        with contextlib.closing(sqlite3.connect(_read_only(path), uri=True)) as connection:
            connection.execute("PRAGMA trusted_schema=OFF")
            found = connection.execute("SELECT type, name, sql FROM sqlite_schema").fetchall()
            tables = set()
            for kind, name, sql in found:
                if kind == "index" and str(name).startswith("sqlite_autoindex_"):
                    continue
                if kind != "table" or (sql or "").strip() != expected.get(name):
                    raise ValueError(f"not a table of this store: {kind} {name!r}")
                tables.add(name)
            if tables != set(expected):
                raise ValueError(f"tables missing: {sorted(set(expected) - tables)}")
            for name, table in _file_tables().items():
                wrong = connection.execute(_wrong_values(table)).fetchone()[0]
                if wrong:
                    raise ValueError(f"{wrong} rows of {name} hold values of another type")
            (last,) = connection.execute("SELECT max(seq) FROM applied_envelopes").fetchone()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"not a dump: {exc}") from exc
    if last != sequence:
        raise ValueError(f"a dump at sequence {last}, not {sequence}")


def _wrong_values(table: Table) -> str:
    """A count of the rows with a value its column does not take (by SQLite's storage class)."""
    checks = [
        f"typeof({_quoted(column.name)}) IN ({_storage(column.type)}, 'null')"
        for column in table.columns
    ]
    return f"SELECT count(*) FROM {_quoted(table.name)} WHERE NOT ({' AND '.join(checks)})"


def _storage(kind: TypeEngine[Any]) -> str:
    base = kind.impl_instance if isinstance(kind, TypeDecorator) else kind
    if isinstance(base, Integer | Boolean):
        return "'integer'"
    if isinstance(base, Float):
        return "'real', 'integer'"
    return "'text'"  # text, times as SQLite's text, JSON as its text


def _load_sqlite(db: Database, path: Path) -> int:
    connection = _connect(_store_path(db), db.keyring)
    try:
        connection.execute("ATTACH DATABASE ? AS snap", (_read_only(path),))
        connection.execute("BEGIN IMMEDIATE")
        try:
            count = _copy_tables(connection, "snap", "main", opening=False, ordered=False)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return count
    finally:
        connection.close()


def _load_rows(connection: Connection, path: Path) -> int:
    """Through the ORM: rows read in clear from the file, written through the store's types."""
    source = _file_engine(path)
    try:
        with source.connect() as reading:
            count = _copy_rows(reading, connection)
    finally:
        source.dispose()
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


# --- reading a dump (tests compare two stores with it) -----------------------------------------


def rows_of(packed: bytes) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows of a dump, by column name, in primary-key order, values as the ORM
    reads them."""
    with tempfile.TemporaryDirectory(prefix="bzzz-snapshot-") as directory:
        path = Path(directory) / "snapshot.db"
        _unpack(packed, path)
        engine = _file_engine(path)
        try:
            with engine.connect() as reading:
                found: dict[str, list[dict[str, Any]]] = {}
                for table in snapshot_tables():
                    ordered = select(table).order_by(*table.primary_key.columns)
                    found[table.name] = [dict(r._mapping) for r in reading.execute(ordered)]
                return found
        finally:
            engine.dispose()


# --- the file and the SQL copies ---------------------------------------------------------------


_SCRATCH = ".bzzz-snapshot-"


@contextlib.contextmanager
def _scratch(db: Database) -> Iterator[Path]:
    """A private (0700) directory for the file, beside a SQLite store (same disk, not a RAM
    /tmp), removed after: it holds opened values for the seconds of a dump or a load."""
    parent = _store_path(db).parent if db.is_sqlite else Path(tempfile.gettempdir())
    _sweep(parent)
    directory = Path(tempfile.mkdtemp(prefix=_SCRATCH, dir=parent))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _sweep(parent: Path) -> None:
    """Remove the scratch directories a process that died mid-dump or mid-load left."""
    stale = time.time() - _STALE_SCRATCH_S
    for leftover in parent.glob(_SCRATCH + "*"):
        with contextlib.suppress(OSError):
            if leftover.is_dir() and leftover.stat().st_mtime < stale:
                shutil.rmtree(leftover, ignore_errors=True)


def _store_path(db: Database) -> Path:
    return Path(make_url(db.url).database or "")


def _read_only(path: Path) -> str:
    return path.resolve().as_uri() + "?mode=ro"


def _file_engine(path: Path) -> Engine:
    """The file through the ORM, sealed columns in clear (no keyring on its dialect)."""
    engine = create_engine(f"sqlite:///{path}")
    attach_keyring(engine.dialect, None)
    return engine


def _create_tables(path: Path) -> None:
    """The snapshot tables (``_file_tables``), with their primary keys and no other index."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        for sql in _file_ddl().values():
            connection.execute(sql)
        connection.commit()


def _connect(store: Path, keyring: Keyring | None) -> sqlite3.Connection:
    """A connection of its own to a SQLite store, with the sealing functions of its keyring."""
    # uri: the ATTACH of a file read-only names it as a URI.
    connection = sqlite3.connect(store, isolation_level=None, check_same_thread=False, uri=True)
    connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    connection.execute("PRAGMA trusted_schema=OFF")
    for name, function in _functions(keyring).items():
        connection.create_function(name, 2, function, deterministic=name.startswith("bzzz_open"))
    return connection


def _functions(keyring: Keyring | None) -> dict[str, Callable[[Any, str], Any]]:
    """SQL functions of sealed columns: (stored value, the column's binding) -> value.

    The opened form is what the column stores in clear (text; JSON text), so a dump holds the
    values a store without keys would hold, and sealing it again gives what the store's own
    column type writes.
    """

    def open_text(stored: Any, aad: str) -> Any:
        if not is_sealed(stored):
            return stored
        if keyring is None:
            raise SealError("unknown_key")
        return keyring.open(stored, aad.encode()).decode()

    def open_json(stored: Any, aad: str) -> Any:
        if stored is None:
            return None
        return SealedJSON(aad).opened_text(stored, keyring)

    def seal_text(clear: Any, aad: str) -> Any:
        if clear is None or keyring is None:
            return clear
        return keyring.seal(str(clear).encode(), aad.encode())

    def seal_json(clear: Any, aad: str) -> Any:
        if clear is None or keyring is None or clear == "null":
            return clear  # a JSON null stays clear, as the column type leaves it
        text = clear if isinstance(clear, str) else json.dumps(clear)
        return json.dumps(keyring.seal(text.encode(), aad.encode()))

    return {
        _OPEN_TEXT: open_text,
        _OPEN_JSON: open_json,
        _SEAL_TEXT: seal_text,
        _SEAL_JSON: seal_json,
    }


def _copy_tables(
    connection: sqlite3.Connection, source: str, target: str, *, opening: bool, ordered: bool
) -> int:
    """Every snapshot table from the attached schema ``source`` into ``target``, one
    ``INSERT … SELECT`` each, the sealed columns opened (``opening``) or sealed again; how many
    rows. ``ordered``: read in primary-key order."""
    count = 0
    for table in snapshot_tables():
        names = [column.name for column in table.columns]
        selected, params = _expressions(table, names, opening=opening)
        order = ", ".join(_quoted(column.name) for column in table.primary_key.columns)
        count += connection.execute(
            f"INSERT INTO {target}.{_quoted(table.name)} ({_listed(names)}) "
            f"SELECT {selected} FROM {source}.{_quoted(table.name)}"
            + (f" ORDER BY {order}" if ordered else ""),
            params,
        ).rowcount
    return count


def _expressions(table: Table, names: list[str], *, opening: bool) -> tuple[str, list[str]]:
    """The SELECT list copying ``names`` of ``table``, sealed columns through their function,
    and the functions' parameters (each sealed column's binding)."""
    selected: list[str] = []
    params: list[str] = []
    for name in names:
        kind = table.columns[name].type
        if isinstance(kind, SealedText):
            function = _OPEN_TEXT if opening else _SEAL_TEXT
        elif isinstance(kind, SealedJSON):
            function = _OPEN_JSON if opening else _SEAL_JSON
        else:
            selected.append(_quoted(name))
            continue
        selected.append(f"{function}({_quoted(name)}, ?)")
        params.append(kind.column)
    return ", ".join(selected), params


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _listed(names: list[str]) -> str:
    return ", ".join(_quoted(name) for name in names)


# --- PostgreSQL's consistent read --------------------------------------------------------------


async def _read_consistent(db: Database, work: Callable[[Connection], T]) -> T:
    """Run ``work`` in one REPEATABLE READ transaction: one state of the store, beside the
    projector's writes (which it never blocks)."""
    async with db.engine.connect() as connection:
        reading = await connection.execution_options(isolation_level="REPEATABLE READ")
        async with reading.begin():
            return await reading.run_sync(work)
