"""hosted LLM agents: the cost ledger and agent memories

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "llm_costs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=128), nullable=True),
        sa.Column("purpose", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_nanos", sa.BigInteger(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("llm_costs", schema=None) as batch_op:
        batch_op.create_index("ix_llm_costs_node_day", ["node_id", "day"], unique=False)
        batch_op.create_index("ix_llm_costs_node_month", ["node_id", "month"], unique=False)
        batch_op.create_index("ix_llm_costs_month", ["month"], unique=False)

    op.create_table(
        "llm_memories",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=128), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("thread_id", sa.String(length=64), nullable=True),
        sa.Column("topic", sa.String(length=512), nullable=False),
        sa.Column("participants", sa.JSON(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("llm_memories", schema=None) as batch_op:
        batch_op.create_index(
            "ix_llm_memories_agent_project", ["agent_id", "project", "created_at"], unique=False
        )
        batch_op.create_index("ix_llm_memories_thread", ["project", "thread_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("llm_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_llm_memories_thread")
        batch_op.drop_index("ix_llm_memories_agent_project")

    op.drop_table("llm_memories")
    with op.batch_alter_table("llm_costs", schema=None) as batch_op:
        batch_op.drop_index("ix_llm_costs_month")
        batch_op.drop_index("ix_llm_costs_node_month")
        batch_op.drop_index("ix_llm_costs_node_day")

    op.drop_table("llm_costs")
