"""agent tokens: a network token may be one agent

``bzzz token create NAME --agent AGENT_ID`` binds a token to one agent id: every call with it
acts as that agent, and it announces that id only. NULL for the tokens made before (any id).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_id", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.drop_column("agent_id")
