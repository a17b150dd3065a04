"""Where the tests' PostgreSQL server is (127.0.0.1:5432 unless BZZZ_TEST_PG_* say otherwise).

A module of its own, not the root conftest: a test directory's conftest imports these by name,
and ``conftest`` names whichever conftest module pytest loaded first.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import asyncpg

PG_HOST = os.environ.get("BZZZ_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("BZZZ_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("BZZZ_TEST_PG_USER", "postgres")
PG_ADMIN_DB = os.environ.get("BZZZ_TEST_PG_DB", "test")
IN_CI = bool(os.environ.get("CI"))


async def pg_admin() -> asyncpg.Connection:
    """A connection to the admin database, which creates and drops the test databases."""
    return await asyncpg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_ADMIN_DB, timeout=5
    )


async def pg_template(name: str, migrate: Callable[[str], Awaitable[None]] | None) -> None:
    """Create database ``name`` and bring it to the newest migration with ``migrate(url)``;
    with None, drop it. Test databases are made from it with ``CREATE DATABASE … TEMPLATE``."""
    admin = await pg_admin()
    try:
        if migrate is None:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            await migrate(f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}")
        except BaseException:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            raise
    finally:
        await admin.close()
