"""Migration 0002 creates exactly the tables the models describe."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection

from bzzz.store.database import Database
from bzzz.store.models import Base

LLM_TABLES = ("llm_costs", "llm_memories")


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, Base.metadata))


def _mentions_llm(diff: Any) -> bool:
    return any(table in repr(diff) for table in LLM_TABLES)


async def test_the_migrated_llm_tables_match_the_models(database_url: str) -> None:
    db = Database(database_url)
    await db.open()
    try:
        async with db.engine.connect() as connection:
            differences = await connection.run_sync(_differences)
            names = await connection.run_sync(
                lambda c: c.dialect.get_table_names(c)  # type: ignore[no-any-return]
            )
    finally:
        await db.close()

    assert set(LLM_TABLES) <= set(names)
    assert [d for d in differences if _mentions_llm(d)] == []
