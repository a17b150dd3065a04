"""Revision 0004 moves the SLURP submission state out of the projected table, keeping it."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from bzzz.store.database import MIGRATIONS


def _migrate(url: str, revision: str, *, down: bool = False) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS))
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)
    finally:
        engine.dispose()


def test_upgrading_to_0004_keeps_what_this_store_knew_of_its_submissions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _migrate(url, "0003")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO slurp_events (id, thread_id, origin, event, status, attempts,"
                " next_attempt_at, last_error, created_at, submitted_at) VALUES"
                " ('slurp-1', 'thread-1', 'node-a', '{}', 'failed', 2,"
                " '2030-01-01 00:00:00', 'HTTP 502', '2029-12-31 00:00:00', NULL)"
            )
        )
    engine.dispose()

    _migrate(url, "head")
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        moved = connection.execute(
            sa.text("SELECT event_id, status, attempts, last_error FROM slurp_submissions")
        ).all()
        columns = {c["name"] for c in sa.inspect(connection).get_columns("slurp_events")}
    engine.dispose()
    _migrate(url, "0003", down=True)
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        back = connection.execute(
            sa.text("SELECT id, status, attempts, last_error FROM slurp_events")
        ).all()
    engine.dispose()

    assert [tuple(r) for r in moved] == [("slurp-1", "failed", 2, "HTTP 502")]
    assert columns == {"id", "thread_id", "origin", "event", "created_at"}
    assert [tuple(r) for r in back] == [("slurp-1", "failed", 2, "HTTP 502")]
