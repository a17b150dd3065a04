"""The store: SQLAlchemy over SQLite or PostgreSQL, schema owned by Alembic."""
