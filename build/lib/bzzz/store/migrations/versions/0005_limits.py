"""agent ids compared regardless of case and Unicode look-alikes

``agents.canonical_id`` holds each id in NFKC, case-folded form (``bzzz.domain.
canonical_agent_id``), indexed: an announcement is refused while a live agent holds another
spelling of the same id.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

from bzzz.domain import canonical_agent_id

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("canonical_id", sa.String(length=512), nullable=True))
        batch_op.create_index("ix_agents_canonical_id", ["canonical_id"], unique=False)
    agents = sa.table("agents", sa.column("id", sa.String), sa.column("canonical_id", sa.String))
    connection = op.get_bind()
    ids = [row[0] for row in connection.execute(sa.select(agents.c.id))]
    for agent_id in ids:
        connection.execute(
            agents.update()
            .where(agents.c.id == agent_id)
            .values(canonical_id=canonical_agent_id(agent_id))
        )


def downgrade() -> None:
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_index("ix_agents_canonical_id")
        batch_op.drop_column("canonical_id")
