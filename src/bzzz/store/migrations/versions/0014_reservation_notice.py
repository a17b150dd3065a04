"""reservations: when the holder was told one is about to end

``noticed_at`` is set when a ``reservation_expiring`` event told the holder its reservation
ends soon (once per end: a renewal clears it), so every node and every repeated notice
envelope gives the event once.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("noticed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reservations", schema=None) as batch_op:
        batch_op.drop_column("noticed_at")
