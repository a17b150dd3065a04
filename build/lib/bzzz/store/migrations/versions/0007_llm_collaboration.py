"""hosted agents that collaborate: a project's knowledge, searchable by full text

``llm_knowledge`` keeps the decisions and insights of consensus and the summaries of episodes,
per project. On PostgreSQL a GIN index over ``to_tsvector('english', text)`` serves the
full-text ranking; on SQLite the node ranks with an FTS5 index of its own (llm/knowledge.py).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "llm_knowledge",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("llm_knowledge", schema=None) as batch_op:
        batch_op.create_index("ix_llm_knowledge_project", ["project", "created_at"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX ix_llm_knowledge_fts ON llm_knowledge "
            "USING gin (to_tsvector('english', text))"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_llm_knowledge_fts")
    with op.batch_alter_table("llm_knowledge", schema=None) as batch_op:
        batch_op.drop_index("ix_llm_knowledge_project")
    op.drop_table("llm_knowledge")
