"""Alembic environment: runs on the connection the node hands over (SQLite or PostgreSQL)."""

from alembic import context

from bzzz.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("bzzz migrations run through bzzz.store.database.Database.open()")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    # The node's progress counter (a bar on a terminal), when it passes one.
    on_version_apply=context.config.attributes.get("on_version_apply"),
)
with context.begin_transaction():
    context.run_migrations()
