"""tasks by assigner: an orchestrator lists the tasks it gave

``GET /api/v1/tasks`` shows a principal that assigns as itself (``token:<id>``, ``jwt:…``)
the tasks it assigned; the index keeps that a lookup, not a scan of every task.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index("ix_tasks_assigner", ["assigner"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_tasks_assigner")
