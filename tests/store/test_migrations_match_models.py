"""The Alembic migrations build exactly the tables, columns and indexes store/models.py declares."""

from __future__ import annotations

import asyncio
import subprocess
import sys
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


def test_the_newest_revision_read_from_the_file_names_is_alembics_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from bzzz.store.database import MIGRATIONS, newest_revision

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(config)
    assert newest_revision() == script.get_current_head()
    # The file name's number is the revision, for every migration (newest_revision relies on it).
    for revision in script.walk_revisions():
        assert revision.path is not None
        assert Path(revision.path).name[:4] == revision.revision


async def test_a_store_at_the_newest_revision_opens_without_loading_alembic(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    db = Database(url)
    await db.open()  # migrates: a new store
    await db.close()
    code = (
        "import asyncio, sys\n"
        "from bzzz.store.database import Database\n"
        f"db = Database({url!r})\n"
        "asyncio.run(db.open()); asyncio.run(db.close())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_a_store_at_an_older_revision_is_brought_to_the_newest_when_opened(
    tmp_path: Path,
) -> None:
    from alembic import command
    from alembic.config import Config

    from bzzz.store.database import MIGRATIONS, newest_revision

    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = connection
            command.upgrade(config, "0009")
    finally:
        engine.dispose()

    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.open()
    await db.close()

    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            version = connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    finally:
        engine.dispose()
    assert [row[0] for row in version] == [newest_revision()] == ["0015"]
