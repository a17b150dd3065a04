"""knowledge facts: the project's knowledge graph (bzzz/knowledge)

``knowledge_facts`` holds each fact the log's ``fact.stated`` made (and ``fact.agreed``,
superseding, erasure changed): its sealed subject, relation, object and statement, the clear
digests that find an entity's facts and the fact a new one supersedes, its status, source,
author and validity. ``v`` numbers the changes in log order (a node's index reloads by it).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_INDEXES = (
    ("ix_knowledge_facts_key", ["project", "key_digest", "valid_until"]),
    ("ix_knowledge_facts_subject", ["project", "subject_digest"]),
    ("ix_knowledge_facts_object", ["project", "object_digest"]),
    ("ix_knowledge_facts_thread", ["source_thread"]),
    ("ix_knowledge_facts_author", ["author"]),
    ("ix_knowledge_facts_v", ["project", "v", "id"]),
    ("ix_knowledge_facts_change", ["v"]),
)


def upgrade() -> None:
    op.create_table(
        "knowledge_facts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=128), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("relation", sa.Text(), nullable=False),
        sa.Column("object", sa.Text(), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("subject_digest", sa.String(length=64), nullable=False),
        sa.Column("object_digest", sa.String(length=64), nullable=False),
        sa.Column("key_digest", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("author", sa.String(length=128), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("source_thread", sa.String(length=64), nullable=True),
        sa.Column("source_message", sa.String(length=64), nullable=True),
        sa.Column("agents", sa.JSON(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("superseded_by", sa.String(length=64), nullable=True),
        sa.Column("supersedes", sa.String(length=64), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("v", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("knowledge_facts", schema=None) as batch_op:
        for name, columns in _INDEXES:
            batch_op.create_index(name, columns, unique=False)


def downgrade() -> None:
    with op.batch_alter_table("knowledge_facts", schema=None) as batch_op:
        for name, _ in reversed(_INDEXES):
            batch_op.drop_index(name)
    op.drop_table("knowledge_facts")
