"""reservations: fencing tokens, and the reservations that ended

``reservations.fencing_token`` is each grant's place in its project's count
(``reservation_fences`` holds the last one a project granted), so a later grant of a path
always carries a larger number than an earlier one. ``reservation_ends`` keeps the
reservations that ended (released, expired, their agent erased or moved, their node removed)
for a while, so a holder that checks a path is told its reservation ended, and why.
Reservations granted before this revision hold token 0.

Revision ID: 0016
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("fencing_token", sa.BigInteger(), nullable=False, server_default="0")
        )
    op.create_table(
        "reservation_fences",
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("last_token", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project"),
    )
    op.create_table(
        "reservation_ends",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=True),
        sa.Column("agent_id", sa.String(length=128), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("paths", sa.JSON(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reservation_ends", schema=None) as batch_op:
        batch_op.create_index("ix_reservation_ends_agent_id", ["agent_id"], unique=False)
        batch_op.create_index("ix_reservation_ends_ended_at", ["ended_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("reservation_ends", schema=None) as batch_op:
        batch_op.drop_index("ix_reservation_ends_ended_at")
        batch_op.drop_index("ix_reservation_ends_agent_id")
    op.drop_table("reservation_ends")
    op.drop_table("reservation_fences")
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.drop_column("fencing_token")
