"""Shared fixtures: real databases (SQLite, PostgreSQL), a real nats-server, nodes.

A store that an in-process node opens for the first time starts as a copy of one migrated
at the start of the session (SQLite: a file; PostgreSQL: a template database), so that each
test does not run the ten migrations again. The copy is what the migrations make; the tests
that prove the migrations themselves are marked ``migrates`` and start from nothing, and so
do the spawned ``bzzz`` processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pgserver import IN_CI, PG_HOST, PG_PORT, PG_USER, pg_admin, pg_template

from bzzz.config import Settings, load_settings
from bzzz.network import sealing
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.store.database import Database

# The network key the nodes of a test share, as an operator gives every node of a network the
# same one (BZZZ_NETWORK_KEY). A test of a wrong key configures its own.
TEST_NETWORK_KEY = bytes(range(32))
TEST_NETWORK_KEY_B64 = sealing.encode_secret(TEST_NETWORK_KEY)


def _check_each_output_schema_once() -> None:
    """The MCP client checks each tool's output schema against the JSON Schema metaschema in
    every new session (~25 ms a tool, a fifth of a short MCP test's CPU); a schema that passed
    once passes again, so each process checks each schema once. Results are still validated
    against it on every call, and a schema that fails is checked (and fails) every time."""
    from jsonschema.validators import validator_for

    validator = validator_for({})
    check = validator.check_schema.__func__  # type: ignore[attr-defined]
    passed: set[str] = set()

    def check_once(cls: type, schema: Any, *args: Any, **kwargs: Any) -> None:
        key = json.dumps(schema, sort_keys=True, default=repr)
        if key not in passed:
            check(cls, schema, *args, **kwargs)
            passed.add(key)

    validator.check_schema = classmethod(check_once)  # type: ignore[method-assign,assignment]


_check_each_output_schema_once()


@pytest.fixture(autouse=True)
def _shared_network_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node that generates its network key generates the test network's one."""
    monkeypatch.setattr(sealing, "first_secret", lambda: TEST_NETWORK_KEY)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "migrates: its stores start empty and run every migration (no migrated copy)"
    )
    config.addinivalue_line(
        "markers", "runs_first: minutes long; started first so that the run does not wait for it"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every xdist worker collects the same order, so this reorders the whole run.
    items.sort(key=lambda item: item.get_closest_marker("runs_first") is None)


def _in_thread(work: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine to the end on a loop of its own (a test's loop may be running here)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(work)
        except BaseException as exc:  # handed to the caller
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


async def _migrate(url: str) -> None:
    db = Database(url)
    try:
        await db.open()
    finally:
        await db.close()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store at the newest migration, made once per session (per xdist worker)."""
    path = tmp_path_factory.mktemp("migrated") / "bzzz.db"
    _in_thread(_migrate(f"sqlite+aiosqlite:///{path}"))
    # Closed, the store is whole in its main file (SQLite folds the WAL in at the last close).
    assert not path.with_name("bzzz.db-wal").exists()
    return path


@pytest.fixture(autouse=True)
def _stores_start_migrated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SQLite store opened in-process for the first time starts as the migrated copy."""
    if request.node.get_closest_marker("migrates"):
        return
    template: Path = request.getfixturevalue("migrated_sqlite")
    opened = Database.open

    async def open_from_copy(self: Database) -> None:
        path = Path(self.url.split("///", 1)[-1]) if self.is_sqlite else None
        if path is not None and path.name and str(path) != ":memory:" and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, path)
            path.chmod(0o600)  # as Database.open makes it
        await opened(self)

    monkeypatch.setattr(Database, "open", open_from_copy)


async def _pg_admin_or_fail() -> asyncpg.Connection:
    """The admin connection; CI fails (never skips) without the server."""
    try:
        return await pg_admin()
    except (OSError, asyncpg.PostgresError) as exc:
        if IN_CI:
            pytest.fail(f"PostgreSQL at {PG_HOST}:{PG_PORT} is required in CI: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}: {exc}")


@pytest.fixture
async def postgres_database() -> AsyncIterator[Callable[[str | None], Awaitable[str]]]:
    """Makes PostgreSQL databases, empty or as a copy of a template; drops them after."""
    admin = await _pg_admin_or_fail()
    made: list[str] = []

    async def make(template: str | None = None) -> str:
        name = f"bzzz_test_{uuid.uuid4().hex[:12]}"
        made.append(name)
        copy = f' TEMPLATE "{template}"' if template else ""
        await admin.execute(f'CREATE DATABASE "{name}"{copy}')
        return f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"

    try:
        yield make
    finally:
        for name in made:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str | None]:
    """The name of a PostgreSQL database at the newest migration, made once per session (per
    xdist worker) to copy; None without the server (the tests that need it fail or skip)."""
    name = f"bzzz_template_{uuid.uuid4().hex[:12]}"
    try:
        _in_thread(pg_template(name, _migrate))
    except (OSError, asyncpg.PostgresError):
        yield None  # postgres_url reports the missing server, test by test
        return
    try:
        yield name
    finally:
        _in_thread(pg_template(name, None))


@pytest.fixture
async def postgres_url(
    request: pytest.FixtureRequest,
    postgres_database: Callable[[str | None], Awaitable[str]],
) -> str:
    """A PostgreSQL database of one test, at the newest migration (empty when ``migrates``)."""
    template = None
    if not request.node.get_closest_marker("migrates"):
        template = request.getfixturevalue("migrated_postgres")
    return await postgres_database(template)


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Awaitable[str]]:
    """Makes a fresh store by name: a SQLite file, or a PostgreSQL database (dropped after);
    both at the newest migration. Tests taking it run once on each."""
    if request.param == "sqlite":

        async def sqlite_file(name: str) -> str:
            return f"sqlite+aiosqlite:///{tmp_path / name / 'bzzz.db'}"

        return sqlite_file
    make: Callable[[str | None], Awaitable[str]] = request.getfixturevalue("postgres_database")
    template: str | None = request.getfixturevalue("migrated_postgres")

    async def database(name: str) -> str:
        return await make(template)

    return database


@pytest.fixture
async def empty_postgres_url(postgres_database: Callable[[str | None], Awaitable[str]]) -> str:
    """An empty PostgreSQL database of one test (a spawned node migrates it)."""
    return await postgres_database(None)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each store test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a node in a temporary data directory, SQLite, no environment."""
    return load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / "node")}})


@pytest.fixture
async def nats_url(tmp_path: Path) -> AsyncIterator[str]:
    """A real nats-server with JetStream on a free port; its credentials are in the URL."""
    server = EmbeddedNats(tmp_path / "nats-fixture")
    await server.start()
    try:
        yield server.client_url
    finally:
        await server.close()


@pytest.fixture
def memory_bus() -> InMemoryBus:
    """An in-memory event log."""
    return InMemoryBus()


@pytest.fixture
async def node(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A running node on an in-memory bus and SQLite."""
    async with Node(settings, bus=memory_bus) as running:
        yield running


@pytest.fixture
async def store_node(
    settings: Settings, memory_bus: InMemoryBus, database_url: str
) -> AsyncIterator[Node]:
    """A running node on an in-memory bus, once on SQLite and once on PostgreSQL."""
    settings.node.database_url = database_url
    async with Node(settings, bus=memory_bus) as running:
        yield running


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A node data directory for spawned processes; no nats-server of it may survive the test."""
    from e2e.support import kill_orphans

    path = tmp_path / "data"
    try:
        yield path
    finally:
        kill_orphans(path)


@pytest.fixture
def clean_env() -> Iterator[dict[str, str]]:
    """An environment without BZZZ_* variables, for spawning processes."""
    yield {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
