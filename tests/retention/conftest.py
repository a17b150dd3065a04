"""Fixtures of the retention tests: nodes on a real nats-server, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
from pgserver import IN_CI, PG_HOST, PG_PORT, PG_USER, pg_admin

from bzzz.config import Settings, load_settings

StoreFactory = Callable[[str], Awaitable[str]]


@pytest.fixture(params=["sqlite", "postgresql"])
async def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Makes a fresh store by name: a SQLite file, or a PostgreSQL database (dropped after)."""
    admin: asyncpg.Connection | None = None
    if request.param == "postgresql":
        try:
            admin = await pg_admin()
        except (OSError, asyncpg.PostgresError) as exc:
            if IN_CI:
                pytest.fail(f"PostgreSQL at {PG_HOST}:{PG_PORT} is required in CI: {exc}")
            pytest.skip(f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}: {exc}")
    made: list[str] = []

    async def make(name: str) -> str:
        if admin is None:
            return f"sqlite+aiosqlite:///{tmp_path / name / 'bzzz.db'}"
        database = f"bzzz_test_{uuid.uuid4().hex[:12]}"
        await admin.execute(f'CREATE DATABASE "{database}"')
        made.append(database)
        return f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"

    try:
        yield make
    finally:
        if admin is not None:
            for database in made:
                await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            await admin.close()


def node_settings(
    tmp_path: Path, name: str, nats_url: str, database_url: str, **retention: float
) -> Settings:
    """A node's settings: its own data directory and store, the shared NATS server."""
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name), "database_url": database_url},
            "bzzz": {"nats_url": [nats_url], "heartbeat_interval": 0.5},
            "retention": dict(retention),
            # Threads ten days old (a manual clock) must not close as idle, nor escalate (the
            # monitor's rules), while the nodes' states are compared.
            "conversation": {"default_timeout": 365 * 86_400, "escalation_rules": []},
        },
    )
