"""Shared fixtures: real databases (SQLite, PostgreSQL), a real nats-server, nodes."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from pgserver import IN_CI, PG_HOST, PG_PORT, PG_USER, pg_admin

from bzzz.config import Settings, load_settings
from bzzz.network import sealing
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.memory import InMemoryBus
from bzzz.node import Node

# The network key the nodes of a test share, as an operator gives every node of a network the
# same one (BZZZ_NETWORK_KEY). A test of a wrong key configures its own.
TEST_NETWORK_KEY = bytes(range(32))
TEST_NETWORK_KEY_B64 = sealing.encode_secret(TEST_NETWORK_KEY)


@pytest.fixture(autouse=True)
def _shared_network_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node that generates its network key generates the test network's one."""
    monkeypatch.setattr(sealing, "first_secret", lambda: TEST_NETWORK_KEY)


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for one test; CI fails (never skips) without the server."""
    try:
        admin = await pg_admin()
    except (OSError, asyncpg.PostgresError) as exc:
        if IN_CI:
            pytest.fail(f"PostgreSQL at {PG_HOST}:{PG_PORT} is required in CI: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}: {exc}")
    name = f"bzzz_test_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


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
