"""the audit trail: this node's hash-chained records, and every node's signed chain heads

``audit_records`` is append-only (bzzz.audit writes it, never updates it); ``audit_heads``
holds the ``audit.head`` envelopes of the log, so a node that rewrites its history is caught.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_records",
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("at", sa.String(length=32), nullable=False),
        sa.Column("principal", sa.String(length=256), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=True),
        sa.Column("session", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=128), nullable=False),
        sa.Column("target", sa.String(length=512), nullable=True),
        sa.Column("outcome", sa.String(length=64), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("node_id", "seq"),
    )
    with op.batch_alter_table("audit_records", schema=None) as batch_op:
        batch_op.create_index("ix_audit_records_principal", ["principal", "at"], unique=False)
        batch_op.create_index("ix_audit_records_agent", ["agent", "at"], unique=False)
    op.create_table(
        "audit_heads",
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("public_key", sa.String(length=64), nullable=False),
        sa.Column("signature", sa.String(length=128), nullable=False),
        sa.Column("envelope_id", sa.String(length=26), nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("node_id", "seq"),
    )


def downgrade() -> None:
    op.drop_table("audit_heads")
    with op.batch_alter_table("audit_records", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_records_agent")
        batch_op.drop_index("ix_audit_records_principal")
    op.drop_table("audit_records")
