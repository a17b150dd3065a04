"""threads that reach decisions: reactions, escalations, SLURP events, thread context columns

Revision ID: 0003
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _thread_columns() -> list[sa.Column[object]]:
    # Nullable: rows of earlier revisions have none of these.
    return [
        sa.Column("shared_context", sa.JSON(), nullable=True),
        sa.Column("decision_log", sa.JSON(), nullable=True),
        sa.Column("consensus", sa.JSON(), nullable=True),
        sa.Column("last_progress_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("epoch_at", sa.DateTime(timezone=True), nullable=True),
    ]


def upgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        for column in _thread_columns():
            batch_op.add_column(column)

    op.create_table(
        "thread_reactions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("thread_id", sa.String(length=64), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=128), nullable=False),
        sa.Column("stance", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("thread_reactions", schema=None) as batch_op:
        batch_op.create_index("ix_thread_reactions_thread", ["thread_id", "at"], unique=False)

    op.create_table(
        "escalations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=64), nullable=False),
        sa.Column("rule", sa.String(length=128), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("triggered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("origin", sa.String(length=64), nullable=False),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("resolved", sa.Boolean(), nullable=False),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("escalations", schema=None) as batch_op:
        batch_op.create_index("ix_escalations_thread", ["thread_id", "resolved"], unique=False)
        batch_op.create_index("ix_escalations_open", ["resolved", "origin"], unique=False)

    op.create_table(
        "slurp_events",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.String(length=64), nullable=False),
        sa.Column("event", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id"),
    )
    with op.batch_alter_table("slurp_events", schema=None) as batch_op:
        batch_op.create_index("ix_slurp_events_due", ["status", "next_attempt_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("slurp_events", schema=None) as batch_op:
        batch_op.drop_index("ix_slurp_events_due")
    op.drop_table("slurp_events")
    with op.batch_alter_table("escalations", schema=None) as batch_op:
        batch_op.drop_index("ix_escalations_open")
        batch_op.drop_index("ix_escalations_thread")
    op.drop_table("escalations")
    with op.batch_alter_table("thread_reactions", schema=None) as batch_op:
        batch_op.drop_index("ix_thread_reactions_thread")
    op.drop_table("thread_reactions")
    with op.batch_alter_table("threads", schema=None) as batch_op:
        for column in reversed(_thread_columns()):
            batch_op.drop_column(column.name)
