"""retention and erasure: message tombstones, the runs every node applied, audit anchors

``message_tombstones`` says which messages lost their content (and when, and why);
``retention_runs`` keeps each ``retention.applied`` / ``retention.forget`` envelope's cut-offs
and what it removed here; ``audit_anchors`` is where a node's audit chain starts once its
older records were pruned.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "message_tombstones",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("purged_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("message_tombstones", schema=None) as batch_op:
        batch_op.create_index("ix_message_tombstones_posted", ["posted_at"], unique=False)
    op.create_table(
        "retention_runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("origin", sa.String(length=64), nullable=False),
        sa.Column("principal", sa.String(length=256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cutoffs", sa.JSON(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("retention_runs", schema=None) as batch_op:
        batch_op.create_index("ix_retention_runs_at", ["at"], unique=False)
    op.create_table(
        "audit_anchors",
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("pruned", sa.BigInteger(), nullable=False),
        sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("node_id"),
    )


def downgrade() -> None:
    op.drop_table("audit_anchors")
    with op.batch_alter_table("retention_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_retention_runs_at")
    op.drop_table("retention_runs")
    with op.batch_alter_table("message_tombstones", schema=None) as batch_op:
        batch_op.drop_index("ix_message_tombstones_posted")
    op.drop_table("message_tombstones")
