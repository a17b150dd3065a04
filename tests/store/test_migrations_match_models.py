"""The Alembic migrations build exactly the tables, columns and indexes store/models.py declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from bzzz.store.database import Database
from bzzz.store.models import Base

pytestmark = pytest.mark.migrates


async def test_the_migrated_schema_has_no_difference_from_the_models(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'schema.db'}"
    db = Database(url)
    await db.open()
    await db.close()
    engine = create_engine(url.replace("+aiosqlite", ""))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": False})
            differences: list[Any] = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()

    assert differences == []
