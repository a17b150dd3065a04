"""SLURP submissions become node-local; a consensus records the node that completed it

The submission state (status, attempts, next attempt, last error, submitted at) moves out of the
log-projected ``slurp_events`` into ``slurp_submissions``, which only the submitting node fills.
``threads.consensus_origin`` names the node responsible for a consensus's SLURP event.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_MOVED = ("status", "attempts", "next_attempt_at", "last_error", "submitted_at")


def upgrade() -> None:
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("consensus_origin", sa.String(length=64), nullable=True))

    op.create_table(
        "slurp_submissions",
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("event_id"),
    )
    with op.batch_alter_table("slurp_submissions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_slurp_submissions_due", ["status", "next_attempt_at"], unique=False
        )

    # Keep what this store knew. Rows of events another node owns are never due here (the due
    # query asks for this node's events) and are listed as that node's.
    op.execute(
        "INSERT INTO slurp_submissions"
        " (event_id, status, attempts, next_attempt_at, last_error, created_at, submitted_at)"
        " SELECT id, status, attempts, next_attempt_at, last_error, created_at, submitted_at"
        " FROM slurp_events"
    )
    with op.batch_alter_table("slurp_events", schema=None) as batch_op:
        batch_op.drop_index("ix_slurp_events_due")
        for name in _MOVED:
            batch_op.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("slurp_events", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("status", sa.String(length=16), nullable=False, server_default="pending")
        )
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE slurp_events SET next_attempt_at = created_at")
    for name in _MOVED:
        op.execute(
            f"UPDATE slurp_events SET {name} = (SELECT s.{name} FROM slurp_submissions s"
            " WHERE s.event_id = slurp_events.id)"
            " WHERE id IN (SELECT event_id FROM slurp_submissions)"
        )
    with op.batch_alter_table("slurp_events", schema=None) as batch_op:
        batch_op.alter_column(
            "next_attempt_at", existing_type=sa.DateTime(timezone=True), nullable=False
        )
        batch_op.create_index("ix_slurp_events_due", ["status", "next_attempt_at"], unique=False)

    with op.batch_alter_table("slurp_submissions", schema=None) as batch_op:
        batch_op.drop_index("ix_slurp_submissions_due")
    op.drop_table("slurp_submissions")
    with op.batch_alter_table("threads", schema=None) as batch_op:
        batch_op.drop_column("consensus_origin")
