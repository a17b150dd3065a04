"""Migrations 0002 and 0005 create exactly the tables the models describe."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection

from bzzz.store.database import Database
from bzzz.store.models import Base

LLM_TABLES = ("llm_costs", "llm_memories", "llm_knowledge")


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, Base.metadata))


# PostgreSQL's full-text index is an expression index only revision 0005 knows (models.py
# cannot declare it for both databases); it is checked below by name.
FTS_INDEX = "ix_llm_knowledge_fts"


def _mentions_llm(diff: Any) -> bool:
    if diff[0] == "remove_index" and diff[1].name == FTS_INDEX:
        return False
    return any(table in repr(diff) for table in LLM_TABLES)


def _indexes(connection: Connection) -> list[str]:
    rows = connection.exec_driver_sql(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'llm_knowledge'"
    )
    return [str(name) for (name,) in rows]


async def test_the_migrated_llm_tables_match_the_models(database_url: str) -> None:
    db = Database(database_url)
    await db.open()
    try:
        async with db.engine.connect() as connection:
            differences = await connection.run_sync(_differences)
            names = await connection.run_sync(
                lambda c: c.dialect.get_table_names(c)  # type: ignore[no-any-return]
            )
            indexes = (
                await connection.run_sync(_indexes)
                if connection.dialect.name == "postgresql"
                else [FTS_INDEX]
            )
    finally:
        await db.close()

    assert FTS_INDEX in indexes
    assert set(LLM_TABLES) <= set(names)
    assert [d for d in differences if _mentions_llm(d)] == []
