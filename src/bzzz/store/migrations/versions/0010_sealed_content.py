"""sealed content: topics widen to text, and PostgreSQL's full-text index over knowledge goes

Content columns now hold AEAD boxes (store/models.py ``SealedJSON`` / ``SealedText``): a sealed
512-character topic no longer fits ``VARCHAR(512)``, and a GIN index over
``to_tsvector(text)`` would index ciphertext. Knowledge is ranked in the node's memory instead
(llm/knowledge.py). Rows written before stay readable as they are (clear values pass through).
SQLite enforces no length, but its schema follows the models like PostgreSQL's (batch mode).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TOPICS = ("threads", "llm_memories")


def _topics(type_: sa.types.TypeEngine[str]) -> None:
    # SQLite cannot alter a column's type: batch mode copies the table (indexes kept).
    for table in _TOPICS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column("topic", type_=type_, existing_nullable=False)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_llm_knowledge_fts")
    _topics(sa.Text())


def downgrade() -> None:
    _topics(sa.String(length=512))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX ix_llm_knowledge_fts ON llm_knowledge "
            "USING gin (to_tsvector('english', text))"
        )
