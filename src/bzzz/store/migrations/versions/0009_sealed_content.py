"""sealed content: topics widen to text, and PostgreSQL's full-text index over knowledge goes

Content columns now hold AEAD boxes (store/models.py ``SealedJSON`` / ``SealedText``): a sealed
512-character topic no longer fits ``VARCHAR(512)``, and a GIN index over
``to_tsvector(text)`` would index ciphertext. Knowledge is ranked in the node's memory instead
(llm/knowledge.py). Rows written before stay readable as they are (clear values pass through).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_TOPICS = ("threads", "llm_memories")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite does not enforce VARCHAR lengths and never had the GIN index
    op.execute("DROP INDEX IF EXISTS ix_llm_knowledge_fts")
    for table in _TOPICS:
        op.alter_column(table, "topic", type_=sa.Text(), existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in _TOPICS:
        op.alter_column(table, "topic", type_=sa.String(length=512), existing_nullable=False)
    op.execute(
        "CREATE INDEX ix_llm_knowledge_fts ON llm_knowledge "
        "USING gin (to_tsvector('english', text))"
    )
