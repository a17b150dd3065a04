"""path reservations: the live ones, one row each

``reservations`` holds each live reservation (bzzz/reservations): its agent and project, its
mode, its (sealed) glob patterns and reason, and when it ends. Rows are deleted when a
reservation is released, expires, or its agent goes offline or is erased, so the table holds
only what is live.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=True),
        sa.Column("agent_id", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=256), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("paths", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.create_index("ix_reservations_agent_id", ["agent_id"], unique=False)
        batch_op.create_index("ix_reservations_expires_at", ["expires_at"], unique=False)
        batch_op.create_index(
            "ix_reservations_project_expires", ["project", "expires_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.drop_index("ix_reservations_project_expires")
        batch_op.drop_index("ix_reservations_expires_at")
        batch_op.drop_index("ix_reservations_agent_id")
    op.drop_table("reservations")
