"""Alembic migrations: the only way dragoman's PostgreSQL schema is created or changed."""
