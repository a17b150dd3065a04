"""Migrations 0002, 0005 and 0010 create exactly the tables the models describe."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection

from bzzz.store.database import Database
from bzzz.store.models import Base

pytestmark = pytest.mark.migrates

LLM_TABLES = ("llm_costs", "llm_memories", "llm_knowledge")


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, Base.metadata))


# PostgreSQL's full-text index was an expression index of revision 0005; revision 0010 drops it
# (the text is sealed: knowledge is ranked in the node's memory). Checked below by name.
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
                else []
            )
    finally:
        await db.close()

    assert FTS_INDEX not in indexes
    assert set(LLM_TABLES) <= set(names)
    assert [d for d in differences if _mentions_llm(d)] == []
