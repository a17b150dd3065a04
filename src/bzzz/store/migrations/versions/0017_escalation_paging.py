"""escalations: paging people on a rota until one acknowledges

``escalation_pages``: one row per escalation and step paged (a rota step, or the project's
admins after the last), with its delivery's state; ``escalation_acks``: who acknowledged an
escalation, how and when (once).

Revision ID: 0017
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "escalation_pages",
        sa.Column("escalation_id", sa.String(64), primary_key=True),
        sa.Column("step", sa.Integer(), primary_key=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("paged_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("origin", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_escalation_pages_status", "escalation_pages", ["status", "origin"])
    op.create_table(
        "escalation_acks",
        sa.Column("escalation_id", sa.String(64), primary_key=True),
        sa.Column("by", sa.String(128), nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("principal", sa.String(256), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("origin", sa.String(64), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("escalation_acks")
    op.drop_index("ix_escalation_pages_status", table_name="escalation_pages")
    op.drop_table("escalation_pages")
